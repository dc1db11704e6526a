#!/usr/bin/env bash
# The relock workflow's hosted half: commit ci/relock.py's patch onto the base, force-push it to the one
# branch $RELOCK_BRANCH, and open its pull request or update the body of the one already open.
#   bash ci/relock-pr.sh DIR      DIR: ci/relock.py's --out (relock.patch, pr-body.md, changed-envs.txt)
# Environment: GH_TOKEN (contents: write, pull-requests: write), REPO (owner/name), BASE (the base branch),
# RELOCK_BRANCH (default envgen/relock). Runs in a checkout of BASE.
set -euo pipefail

out=${1:?usage: relock-pr.sh DIR}
branch=${RELOCK_BRANCH:-envgen/relock}
: "${GH_TOKEN:?GH_TOKEN is not set}" "${REPO:?REPO is not set}" "${BASE:?BASE is not set}"

# The patch comes from a job that ran upstream code: it may change files under locks/ and nothing else.
while IFS=$'\t' read -r _added _deleted path; do
    case $path in
        *..*) echo "relock-pr: the patch names $path; refusing" >&2 && exit 1 ;;
        locks/*) ;;
        *) echo "relock-pr: the patch touches $path, outside locks/; refusing" >&2 && exit 1 ;;
    esac
done < <(git apply --numstat -- "$out/relock.patch")

refuse() { echo "relock-pr: $1; refusing" >&2 && exit 1; }

# Applied to the index only: nothing of the patch is ever written to the work tree (no symlink).
git apply --cached -- "$out/relock.patch"
# --numstat names only the new side of a rename or copy: every path the index now changes, both
# sides, each a regular file (no symlink, no gitlink) under locks/, none of git's own files
# (.gitattributes can name filters).
while IFS= read -r -d '' meta && IFS= read -r -d '' path; do
    read -r _old_mode new_mode _ <<<"${meta#:}"
    case $path in
        locks/*) ;;
        *) echo "relock-pr: the patch touches $path, outside locks/; refusing" >&2 && exit 1 ;;
    esac
    case /$path in
        */.git*) refuse "the patch touches $path, one of git's own files" ;;
    esac
    case $new_mode in
        100644 | 100755 | 000000) ;;
        *) refuse "the patch makes $path mode $new_mode, not a regular file" ;;
    esac
done < <(git diff --cached --no-renames --raw -z HEAD)
envs=$(paste -sd ' ' "$out/changed-envs.txt")
git -c user.name="github-actions[bot]" -c user.email="41898282+github-actions[bot]@users.noreply.github.com" \
    commit --quiet -m "Re-lock $envs" -m "Written by the relock workflow (ci/relock.py); the pull request says what moved."

# One branch, rebuilt from the base on every run: the pull request always shows the latest re-lock.
gh auth setup-git
git push --force --quiet origin "HEAD:refs/heads/$branch"

number=$(gh pr list --repo "$REPO" --head "$branch" --base "$BASE" --state open --json number --jq '.[0].number // empty') ||
    { echo "relock-pr: cannot list the pull requests of $REPO" >&2 && exit 1; }
if [ -n "$number" ]; then
    gh pr edit "$number" --repo "$REPO" --body-file "$out/pr-body.md"
    echo "relock-pr: updated pull request #$number"
else
    gh pr create --repo "$REPO" --head "$branch" --base "$BASE" --title "Re-lock $envs" --body-file "$out/pr-body.md"
fi
