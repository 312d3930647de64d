# Sourced by every lesson script: tutorials/NN_name.sh /path/to/loom
# Sets LOOM (the binary), DATA (tests/data), WORK (a temp dir, removed on exit, where every file
# the lesson writes goes), and two helpers:
#   show CMD...      print "$ CMD" (on stderr, so that pipes after it filter only its output), run it (the output a lesson's .md shows)
#   expect PAT FILE  fail the lesson unless FILE has a line matching the extended regex PAT
#   count PAT FILE N fail unless exactly N lines of FILE match PAT
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 /path/to/loom" >&2; exit 2; }
LOOM=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
[ -x "$LOOM" ] || { echo "not an executable: $1" >&2; exit 2; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DATA=$ROOT/tests/data
WORK=$(mktemp -d "${TMPDIR:-/tmp}/loom-tutorial.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
loom() { "$LOOM" "$@"; }
show() { echo "\$ $*" | sed "s|$DATA/|tests/data/|g" >&2; "$@"; }
expect() {
  grep -Eq -- "$1" "$2" || { echo "LESSON FAILED: expected /$1/ in $2:" >&2; cat "$2" >&2; exit 1; }
}
count() {
  local n; n=$(grep -Ec -- "$1" "$2" || true)
  [ "$n" -eq "$3" ] || { echo "LESSON FAILED: expected $3 lines matching /$1/ in $2, got $n:" >&2; cat "$2" >&2; exit 1; }
}
