#!/bin/sh
test_description='the RSA test instance: plugins, module, pool and `flux rsa` are in place'

. $(dirname $0)/sharness-rsa.sh

test_under_rsa_instance

test_expect_success 'the rsa module is loaded by modprobe because [rsa] is configured' '
	flux module list | grep "^rsa "
'
test_expect_success 'the rsa jobtap plugin is loaded in job-manager' '
	flux jobtap list | grep -w rsa
'
test_expect_success 'flux rsa status answers (no jobs yet)' '
	flux rsa status -a >status.out &&
	test_must_fail grep -v JOBID status.out
'
test_expect_success 'a job without rsa attributes runs untouched, without RSA_* variables' '
	flux run -N1 printenv >env.out &&
	test_must_fail grep -E "^RSA_(RAMDISK|DATA_IN|DATA_OUT)=" env.out
'
test_done
