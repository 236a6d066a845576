#!/bin/sh
test_description='the thesis example job script (Appendix U) with #flux: directives

A batch script names its input and result directories and custom stage-in
(untar) and stage-out (tar) scripts; it runs end to end.'

. $(dirname $0)/sharness-rsa.sh

test_under_rsa_instance

test_expect_success 'the user prepares input.tar and two stage scripts' '
	rsa_wait_pool 60 &&
	mkdir -p test8/input test8/results matrix &&
	seq 1 20000 >matrix/row-a && seq 20000 -1 1 >matrix/row-b &&
	tar cf test8/input/input.tar matrix &&
	cat >stage-in.sh <<-EOF2 &&
	#!/bin/bash
	# \$1 is the RAMDISK directory, \$2 is RSA_DATA_IN directory
	tar xf "\$2/input.tar" -C "\$1"
	EOF2
	cat >stage-out.sh <<-EOF2 &&
	#!/bin/bash
	# \$1 is the RAMDISK directory, \$2 is RSA_DATA_OUT directory
	tar cf "\$2/result.tar" -C "\$1" .
	EOF2
	chmod +x stage-in.sh stage-out.sh
'
test_expect_success 'the job script, with #flux: directives' '
	cat >job.sh <<-EOF2 &&
	#!/bin/bash
	#flux: -N 1
	#flux: --setattr=rsa.data_in="$PWD/test8/input"
	#flux: --setattr=rsa.stage_in="$PWD/stage-in.sh"
	#flux: --setattr=rsa.data_out="$PWD/test8/results"
	#flux: --setattr=rsa.stage_out="$PWD/stage-out.sh"
	# stand-in for mpi-matrix: reads the unpacked matrix, writes results
	paste "\$RSA_DATA_IN/matrix/row-a" "\$RSA_DATA_IN/matrix/row-b" >"\$RSA_DATA_OUT/product"
	echo "\$RSA_DATA_IN" >"\$RSA_DATA_OUT/read-from"
	EOF2
	chmod +x job.sh
'
test_expect_success 'flux batch runs it; it waits for its unpacked inputs' '
	id=$(flux batch job.sh) &&
	flux job wait-event -t 120 $id clean &&
	flux job status $id
'
test_expect_success 'flux rsa wait: result.tar is in the results directory' '
	flux rsa wait -t 60 $id &&
	tar xf test8/results/result.tar -C . ./product ./read-from &&
	paste matrix/row-a matrix/row-b >expect &&
	test_cmp expect product
'
test_expect_success 'the job read the unpacked inputs from its RAM disk' '
	rsa_job_ramdisk "$(cat read-from)" in
'
test_expect_success 'nothing is left behind' '
	test -z "$(rsa_ramdisks)"
'
test_done
