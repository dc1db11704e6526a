"""git itself, for the stages: the bare-repo cache of each remote, and the remotes asked for
refs."""
