#!/usr/bin/env bash
# The ctest test ground_floor: tensor/ is the library's ground floor. No file
# under it includes a header of a floor above (autograd/, nn/, models/, app/,
# cuda/, python/), and none of its compiled objects needs a symbol that only
# an object of those floors defines (a call upward, with or without an
# include: printing once called Tensor::to, defined in autograd/).
#   ground_floor.sh SOURCE_DIR "OBJECT;OBJECT;..."   (the phasor library's objects)
set -euo pipefail
export LC_ALL=C  # sort and comm agree on one order
src=$1
IFS=';' read -r -a objects <<< "$2"
status=0
if includes=$(grep -rnE '#include "(autograd|nn|models|app|cuda|python)/' "$src/tensor"); then
  echo "ground_floor: tensor/ includes a floor above it:" >&2
  echo "$includes" >&2
  status=1
fi
floor=() above=()
for o in "${objects[@]}"; do
  case "$o" in
    */tensor/*) floor+=("$o") ;;
    */autograd/* | */nn/* | */models/*) above+=("$o") ;;
  esac
done
[ ${#floor[@]} -gt 0 ] && [ ${#above[@]} -gt 0 ] || { echo "ground_floor: no objects of tensor/ or of the floors above in the list" >&2; exit 1; }
needed=$(nm --undefined-only --format=posix "${floor[@]}" | awk 'NF >= 2 && $2 == "U" { print $1 }' | sort -u)
defined_above=$(nm --defined-only --format=posix "${above[@]}" | awk 'NF >= 2 && $2 ~ /^[TWBDRV]$/ { print $1 }' | sort -u)
if upward=$(comm -12 <(echo "$needed") <(echo "$defined_above") | grep .); then
  echo "ground_floor: tensor/ calls into the floors above it:" >&2
  echo "$upward" | c++filt >&2
  status=1
fi
[ $status -eq 0 ] && echo "ground_floor: tensor/ (${#floor[@]} objects) includes and calls nothing above it (${#above[@]} objects)"
exit $status
