"""A lock as a graph (pure: no file, no process): its roots, the packages of each platform and the
requirements between them; `why` walks it up from a package, `tree` down from the roots, `audit`
finds the known vulnerabilities of its pip packages in the answers it is given."""
