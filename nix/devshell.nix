# A dev shell for one env of locks/ (called by flake.nix): python from nixpkgs, every locked wheel of this
# system fetched into the Nix store (checked against its sha256) and installed offline, without dependencies,
# into a venv; then the git sources through the env's recipe, which clones them at their locked commits,
# applies the cherry-picks and verifies the resulting trees. CANN and the NPU driver are not provided.
{ pkgs, lockFile, recipe, system }:
let
  lock = import lockFile;
  platform = lock.systems.${system}
    or (throw "env ${lock.env} has no part for ${system}; it has: ${toString (builtins.attrNames lock.systems)}");
  part = lock.platforms.${platform};
  versionParts = builtins.splitVersion part.python;
  python =
    if part.python == null then pkgs.python3
    else pkgs.${"python" + builtins.elemAt versionParts 0 + builtins.elemAt versionParts 1};
  # Wheels keep their file names (pip reads the tags from them), so each store path is linked under its name.
  links = builtins.concatStringsSep "\n" (map
    (p: "ln -sf ${builtins.fetchurl p.fetchurl} \"$wheels/${p.fetchurl.name}\"")
    part.pip);
in
pkgs.mkShell {
  name = "envgen-${lock.env}";
  packages = [ python pkgs.git ];
  shellHook = ''
    envgen_venv=''${ENVGEN_VENV:-$PWD/.venv-${lock.env}}
    if [ ! -f "$envgen_venv/.envgen-${lock.inputHash}" ]; then
      wheels=$(mktemp -d)
      ${links}
      if { [ -f "$envgen_venv/pyvenv.cfg" ] || ${python}/bin/python -m venv "$envgen_venv"; } \
        && PIP_CONFIG_FILE=/dev/null "$envgen_venv/bin/python" -m pip install -q --disable-pip-version-check \
          --no-index --no-deps "$wheels"/*.whl \
        && sh ${recipe} --prefix "$envgen_venv" \
        && touch "$envgen_venv/.envgen-${lock.inputHash}"; then
        echo "envgen: ${lock.env} (${platform}) installed into $envgen_venv" >&2
      else
        echo "envgen: installing ${lock.env} into $envgen_venv failed (see above)" >&2
      fi
      rm -rf "$wheels"
    fi
    . "$envgen_venv/bin/activate"
  '';
}
