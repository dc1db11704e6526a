"""Air-gapped installs: every byte a lock names in one archive (`envgen bundle`), and installing
from it."""
