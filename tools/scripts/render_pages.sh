#!/usr/bin/env bash
# render_pages.sh: renders octet's pages (a run's curves.html, a sweep's sweep.html) to PNG with
# headless Chromium, to look at them as a person will (issue 25 item 14: labels whole and apart,
# round ticks, the run summary, the INT8 d_c heat map). Prints where each PNG is.
#
#   tools/scripts/render_pages.sh [-o DIR] [-s WIDTHxHEIGHT] PAGE_OR_FOLDER...
#     PAGE_OR_FOLDER: an .html file, or a folder holding curves.html or sweep.html (a run folder,
#     runs/latest, a sweep's -o folder). The PNGs go to DIR (default ${TMPDIR:-/tmp}/octet-pages),
#     named after the page's folder and file: <folder>-curves.png. Chromium's screenshot is the
#     window, not the whole page: -s sets it (default 1400x2600; a ResNet-50 INT8 run's heat map
#     alone is ~650 px high).
#
# Needs Debian's chromium (apt-get install -y chromium); it is not part of tools/scripts/setup.sh,
# which installs what builds and tests octet.
set -euo pipefail

out="${TMPDIR:-/tmp}/octet-pages"
size="1400x2600"
usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while getopts "o:s:h" opt; do
  case "$opt" in
    o) out="$OPTARG" ;;
    s) size="$OPTARG" ;;
    h) usage 0 ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
(($# > 0)) || usage
[[ "$size" =~ ^([0-9]+)x([0-9]+)$ ]] || { echo "render_pages.sh: -s $size is not WIDTHxHEIGHT (e.g. 1400x2600)" >&2; exit 2; }
width="${BASH_REMATCH[1]}" height="${BASH_REMATCH[2]}"

browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser="$b"; break; fi
done
if [[ -z "$browser" ]]; then
  echo "render_pages.sh: no Chromium found; install it with: sudo apt-get install -y chromium" >&2
  exit 1
fi

mkdir -p "$out"
status=0
for arg in "$@"; do
  pages=()
  if [[ -d "$arg" ]]; then
    for f in curves.html sweep.html; do [[ -f "$arg/$f" ]] && pages+=("$arg/$f"); done
    if ((${#pages[@]} == 0)); then
      echo "render_pages.sh: $arg holds neither curves.html nor sweep.html" >&2
      status=1
      continue
    fi
  elif [[ -f "$arg" ]]; then
    pages=("$arg")
  else
    echo "render_pages.sh: $arg: no such file or folder" >&2
    status=1
    continue
  fi
  for page in "${pages[@]}"; do
    abs="$(realpath "$page")"
    png="$out/$(basename "$(dirname "$abs")")-$(basename "$abs" .html).png"
    # --no-sandbox: Chromium refuses to run as root with its sandbox (containers, CI). A user
    # data dir of its own keeps a running browser's profile out of it.
    profile="$(mktemp -d)"
    if "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$profile" \
      --window-size="$width,$height" --screenshot="$png" "file://$abs" >"$profile.log" 2>&1 &&
      [[ -s "$png" ]]; then
      echo "$page -> $png"
    else
      echo "render_pages.sh: $browser could not render $page:" >&2
      tail -5 "$profile.log" >&2
      status=1
    fi
    rm -rf "$profile" "$profile.log"
  done
done
exit "$status"
