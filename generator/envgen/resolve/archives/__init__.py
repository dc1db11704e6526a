"""Release archives: fetched within the network limits, verified, and their wheels taken out."""
