#!/usr/bin/env bash
# The ctest test cli_flags_documented: every option of every `phasor` command
# has a description in its --help, and every long flag is named in the README.
#   cli_flags_documented.sh PHASOR_CLI README.md
set -euo pipefail
cli=$1 readme=$2
status=0
table=$(sed -n '/^## The command line/,/^## [^T]/p' "$readme")  # the README's section on the CLI
[ -n "$table" ] || { echo "cli_flags_documented: no section '## The command line' in $readme" >&2; exit 1; }
for cmd in train eval generate plot grad attention info sweep; do
  # One line per option: "--flag described" or "--flag undescribed". CLI11 puts
  # a description at column 31, or on the next line when flag and type are longer.
  entries=$("$cli" "$cmd" --help | sed -n '/^Options:/,/^[A-Z]/p' | awk '
    function done_() { if (flag != "") print flag, (described ? "described" : "undescribed"); flag = "" }
    /^ +-/ { done_(); match($0, /--[a-z][a-z0-9-]*/); flag = substr($0, RSTART, RLENGTH)
             described = length($0) > 30 && substr($0, 30, 1) == " " && substr($0, 31, 1) != " "; next }
    /^                              [^ ]/ { if (flag != "") described = 1; next }
    { done_() }
    END { done_() }')
  while read -r flag state; do
    [ "$flag" = "--help" ] && continue
    if [ "$state" != described ]; then
      echo "cli_flags_documented: phasor $cmd $flag has no description in --help" >&2
      status=1
    fi
    if ! grep -qE -- "(^|[^a-z-])$flag([^a-z-]|$)" "$readme"; then
      echo "cli_flags_documented: phasor $cmd $flag is not in the README's section on the command line" >&2
      status=1
    fi
  done <<< "$entries"
  [ -n "$entries" ] || { echo "cli_flags_documented: no options read from phasor $cmd --help" >&2; status=1; }
done
"$cli" --help | grep -q -- '--version' || { echo "cli_flags_documented: --version is not in phasor --help" >&2; status=1; }
[ $status -eq 0 ] && echo "cli_flags_documented: every flag has a description and a README mention"
exit $status
