#!/bin/sh
test_description='make install puts flux-rsa where Flux finds it

Installed into a staging root (DESTDIR), an instance that uses only the
installed files and has [rsa] configured loads the module at start-up
through modprobe, and `flux rsa` works.  The man pages (built when
configure found Sphinx) are found by man -M PREFIX/share/man and by
`flux help rsa`, and `flux help` lists `flux rsa`.'

. $(dirname $0)/sharness-rsa.sh

FLUX=${FLUX:-flux}
prefix=$(dirname "$(dirname "$FLUX")")
# automake's install rules do not allow spaces in DESTDIR (the trash
# directory has one): stage under /tmp
root=$(mktemp -d /tmp/rsa-install.XXXXXX)

test_expect_success 'make install DESTDIR=root' '
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$RSA_BUILDDIR" install DESTDIR="$root" >install.log 2>&1
'
test_expect_success 'the command, module, plugins, modprobe files and package are in place' '
	test -x "$root$prefix/libexec/flux/cmd/flux-rsa.py" &&
	test -f "$root$prefix/lib/flux/job-manager/plugins/rsa.so" &&
	test -f "$root$prefix/lib/flux/shell/plugins/rsa.so" &&
	test -f "$root$prefix/lib/flux/modules/rsa.py" &&
	test -f "$root$prefix/etc/flux/modprobe/modprobe.d/rsa.toml" &&
	test -f "$root$prefix/etc/flux/modprobe/rc1.d/rsa.py" &&
	table=$(find "$root" -path "*/flux_rsa/core/table.py") &&
	test -n "$table" &&
	pylib=$(dirname "$(dirname "$(dirname "$table")")") &&
	test -f "$pylib/flux_rsa/validate.py" &&
	test -x "$pylib/flux_rsa/stage/_copybatch.so"
'
test_expect_success 'every installed module has its bytecode, naming its installed path' '
	pylib=$(dirname "$(dirname "$(dirname "$(find "$root" -path "*/flux_rsa/core/table.py")")")") &&
	$PYTHON -c "if 1:
	    import importlib.util, marshal, pathlib, sys
	    root, pylib = sys.argv[1:]
	    sources = sorted(pathlib.Path(pylib, \"flux_rsa\").rglob(\"*.py\"))
	    assert len(sources) > 20, sources
	    for py in sources:
	        pyc = pathlib.Path(importlib.util.cache_from_source(str(py)))
	        assert pyc.is_file(), f\"{pyc} is missing\"
	        code = marshal.loads(pyc.read_bytes()[16:])
	        want = str(py)[len(root):]
	        assert code.co_filename == want, (code.co_filename, want)
	    " "$root" "$pylib"
'
test_expect_success 'the installed stager loads its copy loop in C' '
	pylib=$(dirname "$(dirname "$(dirname "$(find "$root" -path "*/flux_rsa/core/table.py")")")") &&
	env -u FLUX_RSA_COPYBATCH PYTHONPATH="$pylib" $PYTHON -c \
	    "from flux_rsa.stage import native; assert native.load() is not None"
'
# man pages are built when configure found Sphinx (ENABLE_DOCS)
grep -q "^man_MANS = " "$RSA_BUILDDIR/Makefile" && test_set_prereq DOCS
command -v man >/dev/null && test_set_prereq MAN
man_dir="$root$prefix/share/man"
# the text of installed page $1 ($2: its section), as man renders it
rendered() {
	MANWIDTH=100 MANPAGER=cat PAGER=cat man -M "$man_dir" $2 "$1" 2>&1 | col -b
}

test_expect_success DOCS 'the man pages are installed' '
	test -s "$man_dir/man1/flux-rsa.1" &&
	test -s "$man_dir/man5/flux-config-rsa.5" &&
	test -s "$man_dir/man7/flux-rsa-attributes.7"
'
test_expect_success DOCS,MAN 'man -M PREFIX/share/man flux-rsa shows flux-rsa(1)' '
	rendered flux-rsa 1 >man1.out &&
	grep "^FLUX-RSA(1)" man1.out &&
	grep "flux-rsa - the RAMDISK Storage Accelerator" man1.out &&
	grep "flux rsa status \[-a\]" man1.out &&
	grep -- "--dependency=afterstaged:A" man1.out &&
	grep "#flux: --setattr=rsa.stage_in=/gpfs/gpfs0/home/wickbt/stage-in.sh" man1.out
'
test_expect_success DOCS,MAN 'the job attributes and the configuration have their pages' '
	rendered flux-rsa-attributes 7 >man7.out &&
	grep "^FLUX-RSA-ATTRIBUTES(7)" man7.out &&
	grep "#flux: --setattr=rsa.data_in=/gpfs/gpfs0/home/wickbt/test8/input" man7.out &&
	grep "RSA_RAMDISK" man7.out &&
	rendered flux-config-rsa 5 >man5.out &&
	grep "^FLUX-CONFIG-RSA(5)" man5.out &&
	grep "node-capacity" man5.out
'
test_expect_success DOCS,MAN 'flux help rsa shows the page' '
	MANPATH="$man_dir" MANWIDTH=100 MANPAGER=cat PAGER=cat FLUX_IGNORE_NO_DOCS=1 \
		"$FLUX" help rsa 2>&1 | col -b >help.out &&
	grep "^FLUX-RSA(1)" help.out &&
	grep -- "--dependency=afterstaged" help.out
'
test_expect_success 'flux help lists flux rsa' '
	test -f "$root$prefix/share/flux/help.d/rsa.json" &&
	FLUX_CMDHELP_PATTERN="$root$prefix/share/flux/help.d/*.json" "$FLUX" help >list.out 2>&1 &&
	grep -E "^   rsa +RSA state of jobs" list.out
'
test_expect_success 'an instance using only the installed files loads the rsa module' '
	mkdir conf &&
	cat >conf/rsa.toml <<-EOF &&
	[rsa]
	proportion = 1
	node-capacity = "64M"
	granule = "4M"
	provider = "dir"
	ramdisk-root = "$PWD/rd"
	[job-manager]
	plugins = [ { load = "$root$prefix/lib/flux/job-manager/plugins/rsa.so" } ]
	[resource]
	noverify = true
	[[resource.config]]
	hosts = "node0"
	cores = "0"
	[[resource.config]]
	hosts = "rsa0"
	cores = "0"
	properties = ["rsa"]
	EOF
	mkdir rd &&
	cat >check.sh <<-EOF &&
	set -e
	flux module list | grep "^rsa "
	flux rsa pool --wait=60
	flux rsa status -a
	EOF
	env PYTHONPATH="$pylib" \
	    FLUX_EXEC_PATH_PREPEND="$root$prefix/libexec/flux/cmd" \
	    FLUX_MODULE_PATH_PREPEND="$root$prefix/lib/flux/modules" \
	    FLUX_MODPROBE_PATH_APPEND="$root$prefix/etc/flux/modprobe" \
	    "$FLUX" start --test-size=2 --test-hosts=node0,rsa0 --config-path="$PWD/conf" \
	    -Slog-stderr-level=3 sh check.sh >check.out 2>&1 ||
	{ cat check.out; false; } &&
	grep "^rsa " check.out &&
	grep "^rsa0 " check.out
'
test_expect_success 'make uninstall removes it again' '
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$RSA_BUILDDIR" uninstall DESTDIR="$root" >uninstall.log 2>&1 &&
	test -z "$(find "$root" -name "*rsa*" -type f)" &&
	rm -rf "$root"
'
test_done
