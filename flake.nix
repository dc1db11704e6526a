{
  # `nix develop .#<env>`: a shell with the env of locks/<env>.nix (see docs/install.md, "With Nix").
  description = "envgen locks as Nix dev shells";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-24.11";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      files = if builtins.pathExists ./locks then builtins.attrNames (builtins.readDir ./locks) else [ ];
      envs = map (f: builtins.substring 0 (builtins.stringLength f - 4) f)
        (builtins.filter (f: builtins.match "[^.]+\\.nix" f != null) files);
      shell = system: env: import ./nix/devshell.nix {
        pkgs = nixpkgs.legacyPackages.${system};
        lockFile = ./locks + "/${env}.nix";
        recipe = ./locks + "/${env}.install.sh";
        inherit system;
      };
      forSystem = system: builtins.listToAttrs (map
        (env: { name = env; value = shell system env; })
        (builtins.filter (env: (import (./locks + "/${env}.nix")).systems ? ${system}) envs));
    in
    {
      devShells = builtins.listToAttrs (map (system: { name = system; value = forSystem system; }) systems);
    };
}
