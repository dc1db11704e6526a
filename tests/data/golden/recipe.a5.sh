#!/bin/sh
# locks/a5.install.sh: installs the git sources of env a5 into a conda env or venv.
# Rendered by `envgen lock` from locks/a5.yml and locks/a5.sources.toml: never edit it;
# change env-templates/ and re-lock. Run it with --help for what it does.
set -eu

ENVGEN_ENV=a5
PICK_NAME=envgen
PICK_EMAIL=envgen@localhost
PICK_DATE=2000-01-01T00:00:00+00:00
PICK_FLAGS='--no-gpg-sign --cleanup=verbatim'

usage() {
	printf '%s\n' \
		'Usage: sh locks/a5.install.sh [--prefix DIR] [--src DIR] [--profile NAME]... [--no-profile NAME]...' \
		'       [--skip-cann] [--bundle FILE] [--archives DIR] [--uv UV]' \
		'' \
		'Installs the git sources of env a5 at their locked commits, in order, each with' \
		'`python -m pip install --no-deps` of the env'"'"'s own python (uv with --uv), then writes activation hooks' \
		'(etc/conda/activate.d/envgen-a5.sh and deactivate.d/; in a venv also a block in bin/activate)' \
		'and site-packages/envgen-a5.pth: the sources on sys.path import by the env'"'"'s python with no activation.' \
		'Install the locked packages first, then run this script in that env:' \
		'  conda-lock install -n NAME locks/a5.yml   (or -p DIR)' \
		'  conda activate NAME' \
		'  sh locks/a5.install.sh' \
		'`envgen install a5 --prefix DIR` does both steps. Running this script again changes nothing and' \
		'keeps the profiles an earlier run enabled (--no-profile NAME drops one); reactivate the env afterwards' \
		'so the activation hooks (CANN, the env'"'"'s variables, profiles) take effect.' \
		'' \
		Options: \
		'  --prefix DIR    the env to install into (default: $CONDA_PREFIX, else $VIRTUAL_ENV)' \
		'  --src DIR       where the sources are cloned (default: <prefix>/src)' \
		'  --profile NAME  also set an optional activation profile (repeatable; remembered for re-runs):' \
		'                    checkpoint-engine: HCCL whitelist' \
		'                    quiet-transformers: filter transformers'"'"' warnings' \
		'  --no-profile NAME  drop a profile an earlier run enabled (repeatable)' \
		'  --skip-cann     skip the sources that need CANN (vllm-ascend): the env is then incomplete' \
		'  --bundle FILE   offline: take the pip part and the sources from a bundle (envgen bundle), every' \
		'                  member checked against its bundle.json (sha256sum) first; needs tar, sha256sum,' \
		'                  git, pip (and zstd for .tar.zst), not envgen. The conda part stays conda-lock'"'"'s.' \
		'  --archives DIR  take the wheels of the release archives from DIR (by file name) instead' \
		'                  of fetching the archives; each is checked against the lock'"'"'s sha256 too' \
		'  --uv UV         install with `UV pip install --python <the env'"'"'s python>` instead of the env'"'"'s' \
		'                  own pip (what `envgen install --installer uv` passes); uv reads no config file' \
		'  -h, --help      show this help' \
		'' \
		'Sources, in install order:' \
		'  vllm: https://github.com/vllm-project/vllm.git v0.23.0 = aaaaaaaaaaaa (editable)' \
		'  vllm-ascend: https://github.com/vllm-project/vllm-ascend.git releases/v0.23.0 = 0123456789ab (editable, needs CANN, 1 cherry-pick, 2 submodules)' \
		'  mindspeed: https://gitcode.com/Ascend/MindSpeed.git 0123456789abcdef0123456789abcdef01234567 = 0123456789ab (editable, on sys.path)' \
		'  transferqueue: https://github.com/Ascend/TransferQueue.git main = ffffffffffff (plain)' \
		'' \
		Environment: \
		'  ASCEND_SET_ENV  CANN'"'"'s set_env.sh; several are separated by '"'"':'"'"' and sourced in order (default: /usr/local/Ascend/cann/set_env.sh)'
}

say() { printf '[%s] %s\n' "$ENVGEN_ENV" "$*" >&2; }
die() { say "error: $*"; exit 1; }

# A value as a single-quoted sh word, for the hooks this script writes.
quote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

# pip_install [NAME=VALUE...] -- ARGS...: `pip install ARGS` by the env's own pip, or with --uv UV by
# `UV pip install --python <the env's python> ARGS` (no uv config file read; pip's --no-input left out,
# its --trusted-host spelled as uv's --allow-insecure-host, --no-index made --offline too). The
# NAME=VALUE pairs (a source's build variables) reach that one command alone, through env(1): never a
# variable of this script. The arguments are rotated in place: pairs, then the command, then ARGS.
pip_install() {
	_pip_left=$#
	_pip_args=0
	while [ "$_pip_left" -gt 0 ]; do
		if [ "$_pip_args" = 0 ] && [ "$1" = -- ]; then
			_pip_args=1
			if [ -n "$uv" ]; then
				set -- "$@" "$uv" pip install --no-config --python "$python"
			else
				set -- "$@" "$python" -m pip install --disable-pip-version-check
			fi
		elif [ "$_pip_args" = 0 ] || [ -z "$uv" ]; then
			set -- "$@" "$1"
		else
			case $1 in
				--no-input) ;;
				--trusted-host) set -- "$@" --allow-insecure-host ;;
				--no-index) set -- "$@" --no-index --offline ;;
				*) set -- "$@" "$1" ;;
			esac
		fi
		shift
		_pip_left=$((_pip_left - 1))
	done
	env "$@"
}

# Replace $2 by $1 only when they differ, so a second run leaves every file untouched.
replace() { if cmp -s "$1" "$2"; then rm -f "$1"; else mv "$1" "$2"; fi; }

add_profile() {
	if ! known_profile "$1"; then
		die "unknown profile $1 (known: $KNOWN_PROFILES)"
	fi
	case " $profiles " in
		*" $1 "*) ;;
		*) profiles="$profiles $1" ;;
	esac
}

drop_profile() {
	if ! known_profile "$1"; then
		die "unknown profile $1 (known: $KNOWN_PROFILES)"
	fi
	dropped="$dropped $1"
}

# A re-run keeps the profiles an earlier run enabled (remembered in $state/profiles), less those dropped with
# --no-profile; a name the lock no longer defines is forgotten.
settle_profiles() {
	if [ -f "$state/profiles" ]; then
		while IFS= read -r name; do
			if [ -n "$name" ] && known_profile "$name"; then add_profile "$name"; fi
		done <"$state/profiles"
	fi
	kept=
	for name in $profiles; do
		case " $dropped " in *" $name "*) ;; *) kept="$kept $name" ;; esac
	done
	profiles=$kept
}

remember_profiles() {
	for name in $profiles; do printf '%s\n' "$name"; done >"$state/profiles.tmp"
	replace "$state/profiles.tmp" "$state/profiles"
	say "profiles:${profiles:- none}"
}

has_profile() { case " $profiles " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# fetch DIR URL SHA DEPTH: one commit by sha; servers refusing unadvertised shas get a full fetch instead.
fetch() {
	if git -C "$1" fetch -q --depth "$4" "$2" "$3" 2>/dev/null; then
		return 0
	fi
	say "$2 refused a fetch of $3 by sha; fetching all its branches and tags"
	unshallow=
	if [ -f "$1/.git/shallow" ]; then unshallow=--unshallow; fi
	git -C "$1" fetch -q $unshallow --tags "$2" '+refs/heads/*:refs/remotes/origin/*' \
		|| die "cannot fetch from $2 into $1: check the URL is reachable (git config url.<base>.insteadOf for mirrors)"
	git -C "$1" cat-file -e "$3^{commit}" 2>/dev/null \
		|| die "commit $3 is no longer at $2 (force-pushed away?): re-lock with envgen lock --update"
}

# checkout NAME URL COMMIT TREE HEAD [PICK...]: the source at its locked commit plus cherry-picks, verified
# against the tree and final HEAD the lock recorded (either may be empty: then it is not checked).
checkout() {
	name=$1 url=$2 commit=$3 tree=$4 final=$5
	shift 5
	dir=$src/$name
	want="$commit $tree $final $*"
	if [ -d "$dir/.git" ]; then
		locked=$(git -C "$dir" rev-parse -q --verify refs/envgen/locked 2>/dev/null || true)
		head=$(git -C "$dir" rev-parse -q --verify HEAD 2>/dev/null || true)
		if [ -n "$locked" ] && [ "$head" = "$locked" ] \
			&& [ "$(cat "$dir/.git/envgen-locked" 2>/dev/null || true)" = "$want" ]; then
			say "$name: already at $commit"
			return 0
		fi
		if [ -n "$locked" ] && [ "$head" = "$locked" ]; then restore_replaced "$dir"; fi
		if [ -n "$head" ] && { [ "$head" != "$locked" ] \
			|| [ -n "$(git -C "$dir" status --porcelain --untracked-files=no)" ]; }; then
			die "$dir holds other work (HEAD $head is not what this script checked out, or files changed):" \
				"move it away or pass --src DIR"
		fi
	elif [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
		die "$dir exists and is not a git checkout: move it away or pass --src DIR"
	else
		git init -q "$dir"
	fi
	say "$name: fetching $commit from $url"
	fetch "$dir" "$url" "$commit" 1
	git -C "$dir" -c advice.detachedHead=false checkout -q --detach "$commit"
	head=$(git -C "$dir" rev-parse HEAD)
	[ "$head" = "$commit" ] || die "$name: HEAD of $dir is $head after checking out $commit"
	# refs/envgen/locked follows every move this script makes, so a run after a failure below (a conflicting
	# pick, a tree the lock does not match) may move the checkout again; only a finished one records $want.
	rm -f "$dir/.git/envgen-locked"
	git -C "$dir" update-ref refs/envgen/locked HEAD
	for pick in "$@"; do
		say "$name: cherry-picking $pick"
		fetch "$dir" "$url" "$pick" 2
		if ! GIT_COMMITTER_NAME=$PICK_NAME GIT_COMMITTER_EMAIL=$PICK_EMAIL GIT_COMMITTER_DATE=$PICK_DATE \
			git -C "$dir" cherry-pick $PICK_FLAGS "$pick" >/dev/null; then
			git -C "$dir" cherry-pick --abort >/dev/null 2>&1 || true
			die "$name: cherry-pick of $pick onto $commit failed in $dir:" \
				"re-lock (envgen lock) to re-verify the picks"
		fi
		git -C "$dir" update-ref refs/envgen/locked HEAD
	done
	if [ -n "$tree" ]; then
		got=$(git -C "$dir" rev-parse 'HEAD^{tree}')
		[ "$got" = "$tree" ] \
			|| die "$name: the tree in $dir is $got, the lock recorded $tree:" \
				"$url changed under the lock; re-lock (envgen lock)"
	fi
	if [ -n "$final" ]; then
		got=$(git -C "$dir" rev-parse HEAD)
		[ "$got" = "$final" ] || die "$name: HEAD of $dir is $got after the cherry-picks, the lock recorded $final"
	fi
	printf '%s\n' "$want" >"$dir/.git/envgen-locked"
}

# submodules NAME URL [PATH COMMIT]...: the source's submodules, recursively, at the commits its verified tree
# records (never at a moving branch), then checked against the lock: exactly these paths at these commits.
# Relative submodule URLs resolve against URL, as they did when locking; url.<base>.insteadOf applies to each.
submodules() {
	name=$1 url=$2 dir=$src/$1
	shift 2
	say "$name: submodules at the commits its tree records"
	git -C "$dir" config -- remote.origin.url "$url"
	git -C "$dir" submodule --quiet sync --recursive
	git -C "$dir" submodule --quiet update --init --recursive --checkout --force \
		|| die "$name: cannot check out its submodules: check their URLs in $dir/.gitmodules are reachable" \
			"(git config url.<base>.insteadOf for mirrors)"
	want=$(while [ $# -ge 2 ]; do printf '%s %s\n' "$1" "$2"; shift 2; done | LC_ALL=C sort)
	# The single-quoted command is expanded by git, once per submodule (displaypath: from $dir, nested ones too).
	got=$(git -C "$dir" submodule --quiet foreach --recursive \
		'printf "%s %s\n" "$displaypath" "$(git rev-parse HEAD)"' | LC_ALL=C sort)
	[ "$got" = "$want" ] \
		|| die "$name: the submodules in $dir are not those the lock recorded (path commit):" \
			"checked out: $(printf '%s' "$got" | tr '\n' ';') recorded: $(printf '%s' "$want" | tr '\n' ';')" \
			"re-lock (envgen lock) if the lock is out of date"
}

# installed NAME DISTRIBUTION KEY: this source was installed from this checkout with these settings.
installed() {
	[ "$(cat "$state/$1.installed" 2>/dev/null || true)" = "$3 $src/$1" ] \
		&& "$python" -c 'import importlib.metadata, sys; importlib.metadata.distribution(sys.argv[1])' "$2" 2>/dev/null
}

mark_installed() { printf '%s\n' "$2 $src/$1" >"$state/$1.installed"; }

# replace_files NAME [FROM TO]...: copy each FROM of the source's checkout over TO (SGLang's
# python/pyproject_npu.toml over python/pyproject.toml) before it builds; both regular files of the
# checkout, never through a symbolic link or out of it. The paths replaced are remembered, so that a
# later checkout of another commit restores them first.
replace_files() {
	name=$1 dir=$src/$1
	shift
	: >"$dir/.git/envgen-replaced"
	while [ $# -ge 2 ]; do
		inside "$dir" "$dir/$1" || die "$name: $1 is not a regular file inside $dir"
		[ -f "$dir/$1" ] && [ ! -L "$dir/$1" ] || die "$name: $1 is not a regular file inside $dir"
		inside "$dir" "$dir/$2" && [ ! -L "$dir/$2" ] || die "$name: $2 would be written outside $dir"
		printf '%s\n' "$2" >>"$dir/.git/envgen-replaced"
		if ! cmp -s -- "$dir/$1" "$dir/$2"; then
			cp -- "$dir/$1" "$dir/$2.envgen-tmp" && mv -- "$dir/$2.envgen-tmp" "$dir/$2" \
				|| die "$name: cannot copy $1 over $2 in $dir"
			say "$name: $2 replaced by $1"
		fi
		shift 2
	done
}

# restore_replaced DIR: the files replace_files changed in a checkout, back to what git has (a file
# it created is removed), so the checkout is clean again.
restore_replaced() {
	[ -f "$1/.git/envgen-replaced" ] || return 0
	while IFS= read -r path; do
		git -C "$1" checkout -q -- "$path" 2>/dev/null || rm -f -- "$1/$path"
	done <"$1/.git/envgen-replaced"
	rm -f "$1/.git/envgen-replaced"
}

# inside DIR PATH: the directory holding PATH exists and, links resolved, lies in DIR.
inside() {
	_envgen_parent=$(cd "$(dirname -- "$2")" 2>/dev/null && pwd -P) || return 1
	_envgen_root=$(cd "$1" && pwd -P) || return 1
	case $_envgen_parent/ in "$_envgen_root"/*) return 0 ;; *) return 1 ;; esac
}

# archive_py COMMAND ARG...: what the archive steps need of python, with the env's own interpreter:
# `sha256 FILE`, `fetch URL FILE NAME HOSTS` (within ENVGEN_NETWORK_BUDGET seconds and
# ENVGEN_DOWNLOAD_LIMIT bytes, a redirect followed to the URL's own scheme, host and port or to a host
# name HOSTS lists, as envgen's own downloads), `extract ARCHIVE MEMBER FILE` (a zip or tar; one
# regular member).
archive_py() {
	"$python" -c '
import hashlib, shutil, sys, tarfile, urllib.request, zipfile
command, args = sys.argv[1], sys.argv[2:]
if command == "sha256":
    digest = hashlib.sha256()
    with open(args[0], "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    print(digest.hexdigest())
elif command == "fetch":
    import os, time
    def limit(name, default):
        try:
            return float(os.environ.get(name) or default)
        except ValueError:
            return default
    budget = limit("ENVGEN_NETWORK_BUDGET", 900)
    ceiling = limit("ENVGEN_DOWNLOAD_LIMIT", 1 << 34)
    deadline, size = time.monotonic() + budget, 0
    from urllib.parse import urlsplit
    def origin(url):
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        try:
            port = parts.port or {"http": 80, "https": 443}.get(scheme)
        except ValueError:
            port = None
        return scheme, parts.hostname or "", port
    class Redirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            host = urlsplit(newurl).hostname or ""
            if origin(newurl) != origin(args[0]) and host not in args[3].lower().split():
                sys.exit("%s redirects to the host %s (%s); an archive is fetched from its own "
                    "scheme, host and port only: if %s rightly serves the archive, add \"%s\" to "
                    "archives.%s.redirect-hosts in the matrix and lock again"
                    % (args[0], urlsplit(newurl).netloc, newurl, host, host, args[2]))
            return super().redirect_request(req, fp, code, msg, headers, newurl)
    try:
        with urllib.request.build_opener(Redirects).open(args[0], timeout=60) as answer, \
                open(args[1], "wb") as out:
            for chunk in iter(lambda: answer.read(1 << 20), b""):
                size += len(chunk)
                if size > ceiling:
                    sys.exit("more than %d bytes (ENVGEN_DOWNLOAD_LIMIT)" % ceiling)
                if time.monotonic() > deadline:
                    sys.exit("not complete within %g s (ENVGEN_NETWORK_BUDGET)" % budget)
                out.write(chunk)
    except (OSError, ValueError) as exc:
        sys.exit("%s: %s" % (args[0], exc))
elif zipfile.is_zipfile(args[0]):
    with zipfile.ZipFile(args[0]) as archive, archive.open(args[1]) as member:
        with open(args[2], "wb") as out:
            shutil.copyfileobj(member, out, 1 << 20)
else:
    with tarfile.open(args[0]) as archive:
        info = archive.getmember(args[1])
        if not info.isfile():
            sys.exit(args[1] + " is not a regular file of the archive")
        with archive.extractfile(info) as member, open(args[2], "wb") as out:
            shutil.copyfileobj(member, out, 1 << 20)
' "$@"
}

# archive NAME URL SHA256 KEY HOSTS [MEMBER SHA256 DISTRIBUTION]...: the wheels a release archive
# holds, each checked against the lock's sha256, installed with `pip install --no-deps`. The archive
# is fetched into the env's state (redirected only to its own host or to a host name HOSTS lists; or,
# with --archives DIR or --bundle, each wheel is taken from there by its name) and checked against its
# sha256 first; nothing of an archive or wheel that does not match is installed.
archive() {
	name=$1 url=$2 sha=$3 key=$4 hosts=$5
	shift 5
	if archive_installed "$name" "$key" "$@"; then
		say "$name: already installed from $url"
		return 0
	fi
	dir=$state/archives/$sha
	mkdir -p "$dir"
	file=$state/archives/$sha.archive
	fetched=
	if [ -f "$file" ]; then fetched=$(archive_py sha256 "$file"); fi
	if [ -z "$archives_dir" ] && [ "$fetched" != "$sha" ]; then
		say "$name: fetching $url"
		if ! archive_py fetch "$url" "$file.part" "$name" "$hosts"; then
			rm -f -- "$file.part"
			die "$name: cannot fetch $url (why above): check the URL is reachable"
		fi
		got=$(archive_py sha256 "$file.part")
		if [ "$got" != "$sha" ]; then
			rm -f -- "$file.part"
			die "$name: $url has sha256 $got, the lock says $sha: the archive was changed or damaged;" \
				"nothing of it was installed"
		fi
		mv -- "$file.part" "$file"
	fi
	n=$#
	while [ "$n" -gt 0 ]; do
		member=$1 member_sha=$2
		shift 3
		n=$((n - 3))
		wheel=$dir/${member##*/}
		if [ -n "$archives_dir" ]; then
			cp -- "$archives_dir/${member##*/}" "$wheel.part" \
				|| die "$name: $archives_dir holds no ${member##*/}"
		else
			archive_py extract "$file" "$member" "$wheel.part" || die "$name: $url holds no $member"
		fi
		got=$(archive_py sha256 "$wheel.part")
		if [ "$got" != "$member_sha" ]; then
			rm -f -- "$wheel.part"
			die "$name: $member has sha256 $got, the lock says $member_sha: it was changed or damaged;" \
				"nothing of the archive was installed"
		fi
		mv -- "$wheel.part" "$wheel"
		set -- "$@" "$wheel"
	done
	say "$name: pip install $(for wheel; do printf '%s ' "${wheel##*/}"; done)"
	pip_install -- -q --no-deps "$@" \
		|| die "$name: $pip_tool could not install its wheels into $prefix (output above)"
	printf '%s\n' "$key" >"$state/archive-$name.installed"
}

# archive_installed NAME KEY [MEMBER SHA256 DISTRIBUTION]...: these wheels were installed, and still
# are.
archive_installed() {
	[ "$(cat "$state/archive-$1.installed" 2>/dev/null || true)" = "$2" ] || return 1
	shift 2
	while [ $# -ge 3 ]; do
		"$python" -c 'import importlib.metadata, sys; importlib.metadata.distribution(sys.argv[1])' "$3" \
			2>/dev/null || return 1
		shift 3
	done
}

# link TARGET DIRECTORY: `cd DIRECTORY && ln -s TARGET` inside site-packages (both relative to it);
# the TARGET pattern must match exactly one regular file, and neither it nor the link may lead out
# of it.
link() {
	site=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])') \
		|| die "cannot ask $python for its site-packages"
	site=$(cd "$site" && pwd -P) || die "$site does not exist"
	base=$site${2:+/$2}
	[ -d "$base" ] && inside "$site" "$base/." || die "link $1: $base is not a directory inside $site"
	# The pattern is expanded here, and only here (its characters are checked when the lock is read).
	set -- "$1" "$base" "$site"/$1
	[ $# -eq 3 ] && [ -f "$3" ] || die "link $1: no single file in $site matches it" \
		"(found: ${3#"$site"/})"
	inside "$site" "$3" || die "link $1: ${3#"$site"/} lies outside $site"
	to=$("$python" -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$3" "$2")
	at=$2/${3##*/}
	if [ -L "$at" ]; then
		was=$("$python" -c 'import os, sys; print(os.readlink(sys.argv[1]))' "$at")
		if [ "$was" = "$to" ]; then
			say "link ${at#"$site"/} -> $to: already there"
			return 0
		fi
		rm -f -- "$at"
	elif [ -e "$at" ]; then
		die "link $1: ${at#"$site"/} exists and is not a symbolic link"
	fi
	ln -s -- "$to" "$at" || die "link $1: cannot make ${at#"$site"/}"
	say "link ${at#"$site"/} -> $to"
}

# cann_scripts: CANN's environment scripts, one a line ($cann_set_env separates them with ':').
cann_scripts() { printf '%s\n' "$cann_set_env" | tr ':' '\n'; }

# cann_missing: the first of CANN's scripts that does not exist (nothing when all do).
cann_missing() {
	cann_scripts | while IFS= read -r script; do
		if [ ! -f "$script" ]; then printf '%s\n' "$script"; break; fi
	done
}

# use_cann NAME: source CANN's environment scripts once, in order, before the first source that needs them.
use_cann() {
	if [ "$cann_sourced" = 1 ]; then return 0; fi
	_envgen_missing=$(cann_missing)
	[ -z "$_envgen_missing" ] || die "source $1 needs CANN, but $_envgen_missing does not exist:" \
		"install the CANN toolkit, set ASCEND_SET_ENV to its set_env.sh (several: separated by ':')," \
		"or pass --skip-cann"
	_envgen_rest=$cann_set_env
	set --  # the scripts see no arguments
	set +u
	while [ -n "$_envgen_rest" ]; do
		_envgen_script=${_envgen_rest%%:*}
		case $_envgen_rest in *:*) _envgen_rest=${_envgen_rest#*:} ;; *) _envgen_rest= ;; esac
		say "sourcing CANN's environment: $_envgen_script"
		. "$_envgen_script"
	done
	set -u
	cann_sourced=1
}

# pth_check PATH: die unless PATH can be written into a .pth file as the Python string literal '<PATH>':
# printable ASCII without a quote (') or backslash, so the literal can neither end early nor hold an escape,
# and the line no line break (site.py splits a .pth file at every one, and runs each line starting "import").
pth_check() {
	_envgen_rest=$(printf '%s' "$1" | LC_ALL=C tr -d '\040-\046\050-\133\135-\176'; printf x)
	[ "$_envgen_rest" = x ] || die "cannot put $1 on the env's python path: a directory named in its .pth file" \
		"may hold printable ASCII only, no quote ('), backslash or newline; pass --src DIR with such a path"
}

# add_pythonpath DIR: a checkout (or its subdirectory) of a source with pythonpath = true, for write_pth.
add_pythonpath() {
	pth_check "$1"
	pth_dirs="$pth_dirs${pth_dirs:+, }'$1'"
}

# write_pth: the sources with pythonpath = true, importable by the env's python from any shell, activated or
# not: site-packages/envgen-ENV.pth, rewritten on every run (and removed when there are none). A plain path
# line of a .pth is appended after site-packages, where an installed distribution of the same import name
# would win; so its `import` line puts them at the front of sys.path, as PYTHONPATH did. site.py runs it before
# the script's directory (or '' for -c and the REPL) is put first, which stays first as with PYTHONPATH. Each
# directory is on sys.path once, at the front: site.py of Python 3.11 reads a venv's .pth files twice, and
# dict.fromkeys keeps the first of equal entries (no comprehension: in Python 3.11 its scope would not see the
# names the line binds). The directories were checked by add_pythonpath: string literals, data, never code.
write_pth() {
	_envgen_site=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
		|| die "cannot ask $python for its site-packages"
	_envgen_pth=$_envgen_site/envgen-$ENVGEN_ENV.pth
	if [ -z "$pth_dirs" ]; then
		if [ -e "$_envgen_pth" ]; then
			rm -f -- "$_envgen_pth"
			say "no source with pythonpath = true: removed $_envgen_pth"
		fi
		return 0
	fi
	mkdir -p "$_envgen_site"
	{
		printf '# envgen %s: the sources with pythonpath = true, ahead of site-packages; written by install.sh.\n' \
			"$ENVGEN_ENV"
		printf 'import sys; sys.path[:] = list(dict.fromkeys([%s] + sys.path))\n' "$pth_dirs"
	} >"$_envgen_pth.tmp"
	replace "$_envgen_pth.tmp" "$_envgen_pth"
	say "pythonpath sources importable without activation: $_envgen_pth"
}

# save_var NAME: write the hook lines keeping NAME's old value (once) for deactivate.d.
save_var() {
	case " $hook_vars " in
		*" $1 "*) return 0 ;;
	esac
	hook_vars="$hook_vars $1"
	old=${hook_prefix}$1
	printf 'if [ -n "${%s+x}" ]; then export %s="$%s"; else unset %s; fi\n' "$1" "$old" "$1" "$old"
}

export_var() {
	save_var "$1"
	printf 'export %s=%s\n' "$1" "$(quote "$2")"
}

deactivate_hook() {
	printf '%s\n' "# envgen $ENVGEN_ENV: restores what activate.d/envgen-$ENVGEN_ENV.sh changed; written by install.sh."
	for var in $hook_vars; do
		old=${hook_prefix}$var
		printf 'if [ -n "${%s+x}" ]; then export %s="$%s"; unset %s; else unset %s; fi\n' \
			"$old" "$var" "$old" "$old" "$var"
	done
}

# venv_hooks: a venv has no activate.d/deactivate.d, so its bin/activate sources the activation hook at its end
# and its deactivate () sources the deactivation hook first, as conda would (only after an activation: activate
# itself calls `deactivate nondestructive` first). A re-run replaces the blocks an earlier run added.
venv_hooks() {
	_envgen_active=${hook_prefix%OLD_}ACTIVE
	_envgen_undo=$hooks/deactivate.d/envgen-$ENVGEN_ENV.sh
	grep -q '^deactivate *() *{' "$prefix/bin/activate" \
		|| say "warning: $prefix/bin/activate defines no deactivate (): deactivating will not undo the hook"
	_envgen_begin="# >>> envgen $ENVGEN_ENV >>>" _envgen_end="# <<< envgen $ENVGEN_ENV <<<" \
		_envgen_apply=". $(quote "$activate"); $_envgen_active=1" \
		_envgen_undo="if [ -n \"\${$_envgen_active-}\" ]; then unset $_envgen_active;\
 [ ! -f $(quote "$_envgen_undo") ] || . $(quote "$_envgen_undo"); fi" \
		awk '
			$0 == ENVIRON["_envgen_begin"] { skip = 1; next }
			skip { if ($0 == ENVIRON["_envgen_end"]) skip = 0; next }
			{ print }
			/^deactivate *\(\) *\{/ && !done {
				print ENVIRON["_envgen_begin"]; print ENVIRON["_envgen_undo"]; print ENVIRON["_envgen_end"]; done = 1
			}
			END { print ENVIRON["_envgen_begin"]; print ENVIRON["_envgen_apply"]; print ENVIRON["_envgen_end"] }
		' "$prefix/bin/activate" >"$prefix/bin/activate.tmp"
	replace "$prefix/bin/activate.tmp" "$prefix/bin/activate"
}

# --bundle FILE: the pip part and the sources come from a bundle (`envgen bundle`) instead of the network.
# Every member is checked against the sha256 bundle.json lists before anything is installed; git is sent to
# mirrors made from the bundle's git bundles, and nowhere else.

# bundle_platform: this host's conda platform, the one whose pip part is installed.
bundle_platform() {
	case $(uname -s)-$(uname -m) in
		Linux-x86_64) printf '%s\n' linux-64 ;;
		Linux-aarch64 | Linux-arm64) printf '%s\n' linux-aarch64 ;;
		*) printf '\n' ;;
	esac
}

# bundle_cat FILE: the tar stream of a bundle (.tar as it is; .tar.zst through zstd).
bundle_cat() {
	if [ "$(dd if="$1" bs=4 count=1 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 28b52ffd ]; then
		zstd -q -dc -- "$1"
	else
		cat -- "$1"
	fi
}

# bundle_index FILE: bundle.json (as `envgen bundle` writes it: sorted keys, two-space indent) as tab-separated
# records: env NAME, input_hash H, platform P, member SHA256 PATH, git PATH URL SHALLOW... A value holding an
# escape, or a manifest of another shape, ends with exit 3 (the caller names the bundle).
bundle_index() {
	awk -v OFS='	' '
		function value(line) {
			if (line ~ /\\/) { bad = 1 }
			sub(/^ *("[a-z_0-9]+": )?"/, "", line)
			sub(/",?$/, "", line)
			return line
		}
		/^  "[a-z_]+": / { section = $1; gsub(/[":]/, "", section); field = "" }
		/^  "env": "/ { print "env", value($0) }
		/^  "input_hash": "/ { print "input_hash", value($0) }
		/^  "format": / { format = $2 }
		section == "platforms" && /^    "/ { print "platform", value($0) }
		/^      "[a-z_]+": / { field = $1; gsub(/[":]/, "", field) }
		section != "" && field == "path" && /^      "path": "/ { path = value($0) }
		section == "members" && /^      "sha256": "/ { sha = value($0) }
		section == "git" && /^      "url": "/ { url = value($0) }
		section == "git" && field == "shallow" && /^        "/ { shallow = shallow OFS value($0) }
		section == "members" && /^    }/ { print "member", sha, path; path = sha = "" }
		section == "git" && /^    }/ { print "git", path, url shallow; path = url = shallow = "" }
		END { if (bad || format != "1,") exit 3 }
	' "$1"
}

# bundle_path PATH: a relative path of plain names (no '..', no option, no space), as the bundle writes them.
bundle_path() {
	printf '%s\n' "$1" | grep -Eqx '[A-Za-z0-9][A-Za-z0-9._+!-]*(/[A-Za-z0-9][A-Za-z0-9._+!-]*)*'
}

bundle_hex() { printf '%s\n' "$1" | grep -Eqx '[0-9a-f]{64}'; }

bundle_commit() { printf '%s\n' "$1" | grep -Eqx '[0-9a-f]{40}|[0-9a-f]{64}'; }

# unpack_bundle FILE DIR: extract only regular files with plain names, then check each against bundle.json.
unpack_bundle() {
	[ -f "$1" ] || die "no bundle at $1"
	command -v sha256sum >/dev/null 2>&1 || die "--bundle needs sha256sum (GNU coreutils) to verify $1"
	if [ "$(dd if="$1" bs=4 count=1 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 28b52ffd ]; then
		command -v zstd >/dev/null 2>&1 || die "$1 is zstd-compressed and zstd is not installed: install zstd," \
			"or make the bundle as a .tar"
	fi
	listing=$(bundle_cat "$1" | tar -tvf -) || die "$1 is not a readable bundle (tar): copy or make it again"
	odd=$(printf '%s\n' "$listing" | awk '$1 !~ /^-/ { print; exit }')
	[ -z "$odd" ] || die "$1 holds a member that is not a regular file ($odd): it was not made by envgen bundle"
	unsafe=$(bundle_cat "$1" | tar -tf - | while IFS= read -r name; do
		bundle_path "$name" || { printf '%s\n' "$name"; break; }
	done)
	[ -z "$unsafe" ] || die "$1 holds a member with an unsafe name: $unsafe"
	mkdir "$2"
	bundle_cat "$1" | tar -xf - -C "$2" || die "cannot extract $1 into $2"
	[ -f "$2/bundle.json" ] || die "$1 has no bundle.json: make it with envgen bundle"
	bundle_index "$2/bundle.json" >"$2.index" || die "$1: bundle.json is not a manifest this script reads"
	while IFS='	' read -r kind sha path; do
		[ "$kind" = member ] || continue
		{ bundle_hex "$sha" && bundle_path "$path"; } || die "$1: bundle.json lists a member that is not a plain" \
			"path with a sha256: $path"
		[ -f "$2/$path" ] || die "$1: member $path is missing (bundle.json lists it): nothing was installed;" \
			"copy the bundle again"
		got=$(sha256sum <"$2/$path" | cut -d' ' -f1)
		[ "$got" = "$sha" ] || die "$1: member $path has sha256 $got, bundle.json says $sha: the bundle was" \
			"altered or damaged in transit; nothing was installed, copy it again"
		printf '%s\n' "$path"
	done <"$2.index" >"$2.checked"
	LC_ALL=C sort "$2.checked" >"$2.listed"
	extra=$(cd "$2" && find . -type f ! -path ./bundle.json | sed 's|^\./||' | LC_ALL=C sort \
		| LC_ALL=C comm -23 - "$2.listed" | head -n 1)
	[ -z "$extra" ] || die "$1: member $extra is not in bundle.json: the bundle was altered; nothing was installed"
}

# use_bundle FILE: verify the bundle, install its pip part for this host, and send git to its mirrors.
use_bundle() {
	bundle_dir=$(mktemp -d "${TMPDIR:-/tmp}/envgen-bundle.XXXXXX") || die "cannot make a temporary directory"
	trap 'rm -rf -- "$bundle_dir"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	b=$bundle_dir/b
	say "verifying $1"
	unpack_bundle "$1" "$b"
	bundle_field() { awk -F '	' -v k="$1" '$1 == k { print $2 }' "$b.index"; }
	[ "$(bundle_field env)" = "$ENVGEN_ENV" ] || die "$1 is a bundle of env $(bundle_field env), not $ENVGEN_ENV"
	platform=$(bundle_platform)
	[ -n "$platform" ] || die "this host ($(uname -s) $(uname -m)) is none of the platforms a bundle carries"
	bundle_field platform | grep -qx -- "$platform" || die "$1 carries $(bundle_field platform | tr '\n' ' ')" \
		"but this host is $platform: make a bundle with --platform $platform"
	bundled_hash=$(bundle_field input_hash)
	beside=$(dirname -- "$0")/$ENVGEN_ENV.sources.toml
	if [ -f "$beside" ]; then
		locked_hash=$(sed -n 's/^input-hash = "\([0-9a-f]*\)"$/\1/p' "$beside")
		[ "$locked_hash" = "$bundled_hash" ] || die "$1 was made for the lock with input hash $bundled_hash;" \
			"$beside has $locked_hash: make the bundle again from this lock, or use the bundle's own locks/"
	fi
	cmp -s -- "$0" "$b/locks/$ENVGEN_ENV.install.sh" || die "$1 carries another recipe than $0:" \
		"it was made for another lock; use its own locks/$ENVGEN_ENV.install.sh, or make the bundle again"
	requirements=$b/requirements/$platform.txt
	[ -f "$requirements" ] || die "$1 has no requirements/$platform.txt: make it again with this envgen"
	# pip checks each file against the hash its requirement names; those hashes must be the lock's, not only
	# the bundle's: each must appear in the lock beside this script.
	yml=$(dirname -- "$0")/$ENVGEN_ENV.yml
	if [ -f "$yml" ]; then
		for sha in $(sed -n 's/.* --hash=sha256:\([0-9a-f]*\)$/\1/p' "$requirements"); do
			grep -qF -- "$sha" "$yml" || die "$1: requirements/$platform.txt pins sha256 $sha, which $yml does" \
				"not: the bundle does not match this lock; nothing was installed"
		done
	else
		say "no $yml beside this script: the pip hashes are checked against the bundle's own lock only"
	fi
	bundle_mirrors "$1"
	if [ -d "$b/archives" ]; then archives_dir=$b/archives; fi
	say "verified every member of $1"
	if [ -s "$requirements" ]; then
		say "installing the pip part for $platform from $1 (no index, every file hash-checked)"
		pip_install PIP_CONFIG_FILE=/dev/null -- -q --no-input --no-index --find-links "$b/pip" --no-deps \
			--require-hashes -r "$requirements" \
			|| die "$pip_tool could not install the pip part from $1 into $prefix (output above)"
	fi
}

# bundle_mirrors FILE: a bare mirror per git bundle (shallow where its history stops), each locked URL rewritten to
# it for git (url.<mirror>.insteadOf), and git allowed no other transport than local files.
bundle_mirrors() {
	n=${GIT_CONFIG_COUNT:-0}
	number=0
	while IFS='	' read -r kind path url shallow; do
		[ "$kind" = git ] || continue
		bundle_path "$path" || die "bundle.json names an unsafe git bundle path: $path"
		number=$((number + 1))
		mirror=$bundle_dir/mirrors/$number.git
		mkdir -p "$mirror"
		git init -q --bare "$mirror"
		for sha in $shallow; do
			bundle_commit "$sha" || die "bundle.json names a shallow commit that is not a commit id: $sha"
			printf '%s\n' "$sha" >>"$mirror/shallow"
		done
		git -C "$mirror" fetch -q -- "$b/$path" '+refs/heads/envgen/*:refs/heads/envgen/*' \
			|| die "$1: $path (for $url) is not a usable git bundle: make the bundle again"
		eval "GIT_CONFIG_KEY_$n=\"url.file://\$mirror.insteadOf\" GIT_CONFIG_VALUE_$n=\$url"
		export "GIT_CONFIG_KEY_$n" "GIT_CONFIG_VALUE_$n"
		n=$((n + 1))
	done <"$b.index"
	# Submodules are cloned from the mirrors too, over the file transport git refuses them by default.
	eval "GIT_CONFIG_KEY_$n=protocol.file.allow GIT_CONFIG_VALUE_$n=always"
	export "GIT_CONFIG_KEY_$n" "GIT_CONFIG_VALUE_$n"
	GIT_CONFIG_COUNT=$((n + 1)) GIT_ALLOW_PROTOCOL=file GIT_TERMINAL_PROMPT=0
	export GIT_CONFIG_COUNT GIT_ALLOW_PROTOCOL GIT_TERMINAL_PROMPT
	say "$number git bundles of $1 stand in for their remotes"
}

KNOWN_PROFILES='checkpoint-engine quiet-transformers'
known_profile() {
	case $1 in
		checkpoint-engine|quiet-transformers) return 0 ;;
	esac
	return 1
}

prefix=${CONDA_PREFIX:-${VIRTUAL_ENV:-}}
src=
profiles=
dropped=
skip_cann=0
bundle=
archives_dir=
uv=
while [ $# -gt 0 ]; do
	case $1 in
		--prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix=$2; shift 2 ;;
		--prefix=*) prefix=${1#*=}; shift ;;
		--src) [ $# -ge 2 ] || die "--src needs a directory"; src=$2; shift 2 ;;
		--src=*) src=${1#*=}; shift ;;
		--profile) [ $# -ge 2 ] || die "--profile needs a name"; add_profile "$2"; shift 2 ;;
		--profile=*) add_profile "${1#*=}"; shift ;;
		--no-profile) [ $# -ge 2 ] || die "--no-profile needs a name"; drop_profile "$2"; shift 2 ;;
		--no-profile=*) drop_profile "${1#*=}"; shift ;;
		--skip-cann) skip_cann=1; shift ;;
		--bundle) [ $# -ge 2 ] || die "--bundle needs a file"; bundle=$2; shift 2 ;;
		--bundle=*) bundle=${1#*=}; shift ;;
		--archives) [ $# -ge 2 ] || die "--archives needs a directory"; archives_dir=$2
			shift 2 ;;
		--archives=*) archives_dir=${1#*=}; shift ;;
		--uv) [ $# -ge 2 ] || die "--uv needs the path of uv"; uv=$2; shift 2 ;;
		--uv=*) uv=${1#*=}; [ -n "$uv" ] || die "--uv needs the path of uv"; shift ;;
		-h | --help) usage; exit 0 ;;
		*) die "unknown argument $1 (see --help)" ;;
	esac
done

[ -n "$prefix" ] || die "no env to install into: pass --prefix DIR, or activate a conda env or venv"
[ -d "$prefix" ] || die "$prefix is not a directory: create the env first (envgen install $ENVGEN_ENV --prefix DIR)"
prefix=$(cd "$prefix" && pwd -P)
python=$prefix/bin/python
[ -x "$python" ] || die "no python at $python: install the locked packages into $prefix first"
"$python" -c 'import os, sys; sys.exit(os.path.realpath(sys.prefix) != os.path.realpath(sys.argv[1]))' "$prefix" || die "$python does not run in $prefix (its sys.prefix differs): pip would install elsewhere"
pip_tool=pip
if [ -n "$uv" ]; then
	[ -f "$uv" ] && [ -x "$uv" ] || die "--uv: $uv is not an executable file"
	pip_tool=uv
fi
src=${src:-$prefix/src}
mkdir -p "$src"
src=$(cd "$src" && pwd -P)
pth_check "$src"
state=$prefix/etc/envgen/$ENVGEN_ENV
mkdir -p "$state"
settle_profiles
cann_set_env=${ASCEND_SET_ENV:-/usr/local/Ascend/cann/set_env.sh}
cann_sourced=0
pth_dirs=
if [ "$skip_cann" = 0 ] && [ -n "$(cann_missing)" ]; then
	die 'source vllm-ascend needs CANN, but' "$(cann_missing)" 'does not exist: install the CANN toolkit, set ASCEND_SET_ENV to its set_env.sh (several: separated by '"'"':'"'"'), or pass --skip-cann'
fi
say "installing into $prefix (sources in $src)"
if [ -n "$bundle" ]; then use_bundle "$bundle"; fi

# 1. vllm: https://github.com/vllm-project/vllm.git v0.23.0
checkout vllm https://github.com/vllm-project/vllm.git aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb ''
if installed vllm vllm d23d5cb24467212c; then
	say 'vllm: already installed at aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'
else
	say 'vllm: pip install'
	pip_install VLLM_TARGET_DEVICE=empty -- --no-deps -e "$src"/vllm
	mark_installed vllm d23d5cb24467212c
fi

# 2. vllm-ascend: https://github.com/vllm-project/vllm-ascend.git releases/v0.23.0
if [ "$skip_cann" = 1 ]; then
	say 'vllm-ascend: skipped (needs CANN; --skip-cann)'
else
	checkout vllm-ascend https://github.com/vllm-project/vllm-ascend.git 0123456789abcdef0123456789abcdef01234567 cccccccccccccccccccccccccccccccccccccccc dddddddddddddddddddddddddddddddddddddddd 89abcdef0123456789abcdef0123456789abcdef
	submodules vllm-ascend https://github.com/vllm-project/vllm-ascend.git csrc/third_party/catlass 9999999999999999999999999999999999999999 'csrc/third_party/catlass/docs theme' 8888888888888888888888888888888888888888
	use_cann vllm-ascend
	if installed vllm-ascend vllm_ascend 297d29e9766d5731; then
		say 'vllm-ascend: already installed at 0123456789abcdef0123456789abcdef01234567'
	else
		say 'vllm-ascend: pip install'
		pip_install SOC_VERSION=ascend950dt_9582 -- --no-deps --no-build-isolation --extra-index-url https://triton-ascend.osinfra.cn/pypi/simple/ --trusted-host triton-ascend.osinfra.cn -e "$src"/vllm-ascend
		mark_installed vllm-ascend 297d29e9766d5731
	fi
fi

# 3. mindspeed: https://gitcode.com/Ascend/MindSpeed.git 0123456789abcdef0123456789abcdef01234567
checkout mindspeed https://gitcode.com/Ascend/MindSpeed.git 0123456789abcdef0123456789abcdef01234567 eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee ''
if installed mindspeed mindspeed 913598b8ec82c7ac; then
	say 'mindspeed: already installed at 0123456789abcdef0123456789abcdef01234567'
else
	say 'mindspeed: pip install'
	pip_install -- --no-deps -e "$src"/mindspeed
	mark_installed mindspeed 913598b8ec82c7ac
fi
add_pythonpath "$src"/mindspeed

# 4. transferqueue: https://github.com/Ascend/TransferQueue.git main (from verl:requirements-npu.txt:7)
checkout transferqueue https://github.com/Ascend/TransferQueue.git ffffffffffffffffffffffffffffffffffffffff '' ''
if installed transferqueue TransferQueue bbeba45f402f1196; then
	say 'transferqueue: already installed at ffffffffffffffffffffffffffffffffffffffff'
else
	say 'transferqueue: pip install'
	pip_install -- --no-deps "$src"/transferqueue
	mark_installed transferqueue bbeba45f402f1196
fi

# The sources with pythonpath = true, on sys.path without activation.
write_pth

# Activation hooks: CANN, the env's variables and the chosen profiles.
hook_prefix=_ENVGEN_A5_OLD_
hook_vars=
activate_hook() {
	printf '%s\n' '# envgen a5: activation hook written by install.sh; rerun that to change it.'
	cann_scripts | while IFS= read -r script; do
		if [ -f "$script" ]; then printf '. %s\n' "$(quote "$script")"; fi
	done
	export_var TOKENIZERS_PARALLELISM false
	if has_profile checkpoint-engine; then
		export_var HCCL_WHITELIST_DISABLE 0
		export_var HCCL_WHITELIST_FILE /path/to/whitelist.json
	fi
	if has_profile quiet-transformers; then
		export_var TRANSFORMERS_VERBOSITY error
	fi
}

hooks=$prefix/etc/conda
mkdir -p "$hooks/activate.d" "$hooks/deactivate.d"
activate=$hooks/activate.d/envgen-$ENVGEN_ENV.sh
{ activate_hook >"$activate.tmp"; deactivate_hook >"$hooks/deactivate.d/envgen-$ENVGEN_ENV.sh.tmp"; }
replace "$activate.tmp" "$activate"
replace "$hooks/deactivate.d/envgen-$ENVGEN_ENV.sh.tmp" "$hooks/deactivate.d/envgen-$ENVGEN_ENV.sh"
if [ -f "$prefix/pyvenv.cfg" ] && [ -f "$prefix/bin/activate" ]; then venv_hooks; fi
remember_profiles
say "done: reactivate the env to pick up $activate"
