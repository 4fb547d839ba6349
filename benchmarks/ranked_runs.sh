#!/usr/bin/env bash
# Ranked runs of the bundled leaderboards' correct solutions and examples, on this machine's GPU,
# as the publish job makes them: each file staged as submissions/<leaderboard>/<author>/, one
# leaderboard-mode pytest per leaderboard (its reference timed in the same run), one results
# document each. File them afterwards, on the repository's machine, with
# benchmarks/file_ranked_runs.sh (kernelboard results add).
#
#   bash benchmarks/ranked_runs.sh OUT_DIR [LEADERBOARD...]
#
# The author of a solution is its file's stem without "submission_" (pytorch, triton,
# cuda_inline, ...); the examples under submissions/ keep theirs. Runs one after another: timed
# calls of two runs must never share the GPU.
set -u
out=${1:?usage: ranked_runs.sh OUT_DIR [LEADERBOARD...]}
shift
mkdir -p "$out"
leaderboards=${*:-conv2d grayscale histogram identity matmul prefixsum softmax vectoradd vectoradd_cu}
for lb in $leaderboards; do
    for file in leaderboards/"$lb"/solutions/correct/*; do
        case $file in *.py | *.cu) ;; *) continue ;; esac
        name=$(basename "$file")
        author=${name%.*}
        author=${author#submission_}
        mkdir -p "submissions/$lb/$author"
        cp "$file" "submissions/$lb/$author/submission.${name##*.}"
    done
    started=$SECONDS
    python -m pytest "submissions/$lb" -q -p no:cacheprovider --kb-mode leaderboard \
        --kb-remeasure-reference --kb-results "$out/$lb.json" >"$out/$lb.log" 2>&1
    echo "$lb: rc=$? $((SECONDS - started)) s; $(tail -1 "$out/$lb.log")"
done
