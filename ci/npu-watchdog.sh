#!/usr/bin/env bash
# npu-check.yml's watchdog: a check job whose runner label has no runner online would stay queued for a day.
# Polls this run's jobs; when every check job has started, it is done. When some are still queued after
# QUEUE_MINUTES, it names them in the job summary, lets the running ones finish, then cancels the run (GitHub
# cancels no single job), so the summary job reports them as having no result.
# Environment: GH_TOKEN (actions: write), REPO (owner/name), RUN_ID, EXPECTED (the number of check jobs),
# QUEUE_MINUTES; POLL_SECONDS (default 60).
set -euo pipefail

: "${GH_TOKEN:?}" "${REPO:?}" "${RUN_ID:?}" "${EXPECTED:?}" "${QUEUE_MINUTES:?}"
poll=${POLL_SECONDS:-60}
deadline=$(($(date +%s) + QUEUE_MINUTES * 60))

# One line per check job: its status (queued, in_progress, completed, ...) and its name.
check_jobs() {
    gh api --paginate "repos/$REPO/actions/runs/$RUN_ID/jobs" \
        --jq '.jobs[] | select(.name | startswith("check ")) | "\(.status)\t\(.name)"'
}

while :; do
    jobs=$(check_jobs)
    listed=$(grep -c . <<<"$jobs" || true)
    waiting=$(grep -E '^(queued|waiting|pending)' <<<"$jobs" || true)
    if [ "$listed" -ge "$EXPECTED" ] && [ -z "$waiting" ]; then
        echo "npu-check watchdog: all $listed check jobs got a runner"
        exit 0
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
        break
    fi
    sleep "$poll"
done

{
    echo "### Jobs without a runner"
    echo
    echo "No runner carrying these labels picked the job up within $QUEUE_MINUTES minutes (see ci/npu-runners.toml):"
    echo
    cut -f2 <<<"$waiting" | sed 's/^/- /'
} | tee -a "${GITHUB_STEP_SUMMARY:-/dev/null}"

# The running checks finish first (their own timeout bounds this), then the queued ones are cancelled.
while grep -q '^in_progress' <<<"$(check_jobs)"; do
    sleep "$poll"
done
echo "npu-check watchdog: cancelling the run to release the queued jobs" >&2
gh run cancel "$RUN_ID" --repo "$REPO"
exit 1
