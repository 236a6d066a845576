#!/bin/sh
test_description='make install puts flux-rsa where Flux finds it

Installed into a staging root (DESTDIR), an instance that uses only the
installed files and has [rsa] configured loads the module at start-up
through modprobe, and `flux rsa` works.'

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
	test -f "$pylib/flux_rsa/validate.py"
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
