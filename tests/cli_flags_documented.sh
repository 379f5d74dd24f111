#!/usr/bin/env bash
# The ctest test cli_flags_documented: every command `phasor --help` lists has
# a row in the README's table of commands, and every option of each command
# (from `phasor <command> --help`) has a description there and is named in
# that command's rows of the table. The lists come from the program itself,
# so a new command or flag the README lacks fails here.
#   cli_flags_documented.sh PHASOR_CLI README.md
set -euo pipefail
cli=$1 readme=$2
status=0
complain() { echo "cli_flags_documented: $*" >&2; status=1; }
section=$(sed -n '/^## The command line/,/^## [^T]/p' "$readme")  # the README's section on the CLI
[ -n "$section" ] || { echo "cli_flags_documented: no section '## The command line' in $readme" >&2; exit 1; }
# The commands: the names of the "Subcommands:" part of `phasor --help`.
commands=$("$cli" --help | sed -n '/^Subcommands:/,/^$/p' | awk 'NR > 1 && /^  [a-z]/ { print $1 }')
[ -n "$commands" ] || { echo "cli_flags_documented: no commands read from phasor --help" >&2; exit 1; }
for cmd in $commands; do
  rows=$(grep -E -- "^\| \`phasor $cmd( |\`)" <<< "$section" || true)  # the table rows of this command
  [ -n "$rows" ] || complain "phasor $cmd has no row in the README's table of commands"
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
    [ "$state" = described ] || complain "phasor $cmd $flag has no description in --help"
    grep -qE -- "(^|[^a-z-])$flag([^a-z-]|$)" <<< "$rows" ||
      complain "phasor $cmd $flag is not in the README's table row of phasor $cmd"
  done <<< "$entries"
  [ -n "$entries" ] || complain "no options read from phasor $cmd --help"
done
"$cli" --help | grep -q -- '--version' || complain "--version is not in phasor --help"
grep -qE -- '^\| `phasor --version`' <<< "$section" || complain "--version has no row in the README's table of commands"
[ $status -eq 0 ] && echo "cli_flags_documented: every command has a README row, and every flag a description and a mention in it ($(wc -w <<< "$commands") commands)"
exit $status
