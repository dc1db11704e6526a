"""Lock -> locks/<env>.install.sh, the POSIX sh recipe that installs the git sources into an env."""
