#!/usr/bin/env bash
# The scaling study of docs/RESULTS.md ("Scaling", issue 33): `phasor sweep
# --preset scale`, about 4.1 hours of this 2-core machine, run in pieces.
#   bash scripts/scale_study.sh run [MINUTES]   # one piece: starts cells for MINUTES (default 90), then the report
#   bash scripts/scale_study.sh report          # only regenerates the report from docs/results/scale/
# The sweep lives in runs/scale/ and is resumable: rerun `run` until it says
# no cells are left (the throughput rounds follow the last cell). On another
# machine, runs/scale/ is first seeded from the committed results, so the
# study continues there too. A piece
# starts no cell after MINUTES and the longest cell takes about 15 minutes, so
# a piece of 90 stays under 2 hours even on a machine busy enough to double
# that (about 30 minutes). After each piece the raw results
# (plan.json, throughput.json and every finished cells/<cell>/result.json) are
# copied to docs/results/scale/; the report (docs/results/scale/report.md and
# gap_<task>.svg) is generated from that copy alone, and spliced into
# docs/RESULTS.md between its "scale report" markers. Commit docs/results/scale/
# and docs/RESULTS.md after each piece: partial results say which cells are done.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-run}
out=runs/scale
results=docs/results/scale
# copy_results FROM TO: a sweep folder's raw results (plan.json, throughput.json,
# every cells/<cell>/result.json), which say what ran and which cells are done.
copy_results() {
  mkdir -p "$2"
  cp "$1/plan.json" "$2/"
  [ ! -f "$1/throughput.json" ] || cp "$1/throughput.json" "$2/"
  for result in "$1"/cells/*/result.json; do
    [ -f "$result" ] || continue
    cell=$(basename "$(dirname "$result")")
    mkdir -p "$2/cells/$cell"
    cp "$result" "$2/cells/$cell/"
  done
}
case $what in
  run)
    minutes=${2:-90}
    bash scripts/build.sh phasor_cli
    # On a machine that has not run a piece yet (a fresh clone), the committed
    # results say which cells are done: a cell with a result.json is not trained again.
    if [ ! -f "$out/plan.json" ] && [ -f "$results/plan.json" ]; then
      copy_results "$results" "$out"
      echo "scale_study: $out seeded from $results ($(ls "$results"/cells 2>/dev/null | wc -l) cells done)"
    fi
    start=$(date +%s)
    build/phasor sweep --preset scale --out "$out" --stop-after "$minutes"
    echo "scale_study: this piece took $(( ($(date +%s) - start) / 60 )) min"
    copy_results "$out" "$results"
    ;;
  report) ;;
  *) echo "usage: bash scripts/scale_study.sh run [MINUTES] | report" >&2; exit 2 ;;
esac
[ -f "$results/plan.json" ] || { echo "scale_study: no $results/plan.json; run a piece first" >&2; exit 1; }
[ -x build/phasor ] || bash scripts/build.sh phasor_cli
build/phasor sweep --report-only --out "$results" > /dev/null
# The report without its own heading, its plots' paths relative to docs/, between the markers.
awk -v report="$results/report.md" '
  /<!-- scale report: begin/ {
    print
    heading = 1
    while ((getline line < report) > 0) {
      if (heading) { heading = 0; continue }
      gsub(/\]\(gap_/, "](results/scale/gap_", line)
      print line
    }
    skipping = 1
    next
  }
  /<!-- scale report: end/ { skipping = 0 }
  !skipping { print }' docs/RESULTS.md > docs/RESULTS.md.tmp.$$
grep -q "<!-- scale report: end" docs/RESULTS.md.tmp.$$ || { rm -f docs/RESULTS.md.tmp.$$; echo "scale_study: docs/RESULTS.md lacks the scale report markers" >&2; exit 1; }
mv docs/RESULTS.md.tmp.$$ docs/RESULTS.md
echo "scale_study: report in $results/report.md and docs/RESULTS.md (Scaling)"
