"""`envgen check`: the static steps, the re-solve, the throwaway install and the NPU check, and
the report of their steps."""
