#!/usr/bin/env bash
# File the results documents benchmarks/ranked_runs.sh wrote (on a GPU machine) into results/,
# with `kernelboard results add`, as the publish job does: the staged solutions are staged here
# again for the moment, so their code goes into results/_code/ by hash, then removed.
#
#   bash benchmarks/file_ranked_runs.sh RUNS_DIR COMMIT
set -eu
runs=${1:?usage: file_ranked_runs.sh RUNS_DIR COMMIT}
commit=${2:?the commit the runs evaluated}
staged=()
for doc in "$runs"/*.json; do
    lb=$(basename "$doc" .json)
    for file in leaderboards/"$lb"/solutions/correct/*; do
        case $file in *.py | *.cu) ;; *) continue ;; esac
        name=$(basename "$file")
        author=${name%.*}
        author=${author#submission_}
        if [ ! -e "submissions/$lb/$author" ]; then
            mkdir -p "submissions/$lb/$author"
            cp "$file" "submissions/$lb/$author/submission.${name##*.}"
            staged+=("submissions/$lb/$author")
        fi
    done
    kernelboard results add "$doc" --commit "$commit"
done
for folder in "${staged[@]}"; do rm -r "$folder"; done
