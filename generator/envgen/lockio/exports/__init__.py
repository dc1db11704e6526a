"""Files derived from a Lock for tools other than conda-lock: requirements.txt, PEP 751 pylock, Nix,
CycloneDX."""
