"""The bad-input catalog: malformed rsa attributes, each with the one-line
message it is refused with at submit (key, value, what is accepted).
{t} stands for the test tree and {u} for the submitting user
(test_bad_input.py fills them in and checks every case).
"""

from flux_rsa.checks import Pool
from flux_rsa.core import Policy

# a pool of 2 RSA nodes of 64M in 4M granules, span-fill 0 (no headroom:
# the sizes below are about the pool's whole, as t2000's are with it)
POOL = Pool(
    Policy(node_capacity=64 << 20, granule=4 << 20, provider="glusterfs", span_fill=0),
    nodes=2,
)

IN = "an absolute path to a directory to stage in"
OUT = "an absolute path to a directory to stage out to"
METHOD = '"copy", "tar", or the absolute path of an executable script'
DELAY = 'how long the inputs stay after start: seconds or a duration such as "90s", "5m", "2h", at most "30d"'
SIZE = 'a RAM-disk size with a unit, such as "512M", "16G" or "2T"; K, M, G, T, P count in powers of 1024'
ON_LATE = '"ignore" to start on data_in, or "wait" to hold the job for its inputs'
VERIFY = '"size" or "checksum"'
PATHS = (
    "\"bind\" (the job sees the RAM disk at data_in's and data_out's own paths) "
    'or "env" (only RSA_DATA_IN and RSA_DATA_OUT point at it)'
)
KNOWN = "known keys: data_in, data_out, stage_in, stage_out, delay, capacity, on_late, verify, paths, handoff, fs"
TABLE = "(use e.g. --setattr=rsa.data_in=/abs/dir --setattr=rsa.data_out=/abs/dir)"
CAN_READ = "(must be an existing directory you can read)"
CAN_WRITE = "(must be an existing directory you can write)"
SCRIPT = "(must be an executable script you can read)"
LONG = "/long/" + "a" * 102400  # a 100 KB path

# (name, rsa attributes, the message); "{t}" is the test tree, "{u}" the
# submitting user's name.  The tree: in/ (with sub/), out/, file,
# stage.sh (executable), noexec.sh, noread.sh (executable, unreadable),
# unreadable/, unwritable/, locked/ (cannot be entered, holds deep/),
# private/ (cannot be entered, holds pub/), sneaky -> private/pub,
# outlink -> in/sub, loop -> loop.
CATALOG = [
    # wrong types for the whole table
    ("rsa=5", 5, f"rsa: 5 is not a table of settings {TABLE}"),
    (
        "rsa is a list",
        ["/a", "/b"],
        f'rsa: ["/a", "/b"] is not a table of settings {TABLE}',
    ),
    ("rsa is a string", "/p/in", f"rsa: '/p/in' is not a table of settings {TABLE}"),
    ("rsa is true", True, f"rsa: true is not a table of settings {TABLE}"),
    # unknown keys
    (
        "unknown key",
        {"data_in": "{t}/in", "speed": "fast"},
        f"rsa.speed: unknown key ({KNOWN})",
    ),
    ("key with a dash", {"data-in": "{t}/in"}, f"rsa.data-in: unknown key ({KNOWN})"),
    (
        "huge unknown key",
        {"k" * 70000: 1},
        f"rsa.'{'k' * 512}...{'k' * 512}' (70000 characters): unknown key ({KNOWN})",
    ),
    # paths: shape
    (
        "relative data_in",
        {"data_in": "in"},
        f"rsa.data_in: 'in' is not absolute ({IN})",
    ),
    (
        "relative data_out",
        {"data_out": "./out"},
        f"rsa.data_out: './out' is not absolute ({OUT})",
    ),
    ("empty data_in", {"data_in": ""}, f"rsa.data_in: '' is empty ({IN})"),
    ("data_in is a number", {"data_in": 5}, f"rsa.data_in: 5 is not a path ({IN})"),
    (
        "data_in is a list",
        {"data_in": ["/a"]},
        f'rsa.data_in: ["/a"] is not a path ({IN})',
    ),
    (
        "data_in is a table",
        {"data_in": {"path": "/a"}},
        f'rsa.data_in: {{"path": "/a"}} is not a path ({IN})',
    ),
    (
        "data_in with ..",
        {"data_in": "{t}/in/../out"},
        f"rsa.data_in: '{{t}}/in/../out' contains '..' ({IN})",
    ),
    (
        "data_in with NUL",
        {"data_in": "/tmp/a\0b"},
        f"rsa.data_in: '/tmp/a\\x00b' contains a NUL character ({IN})",
    ),
    (
        "100 KB data_in",
        {"data_in": LONG},
        f"rsa.data_in: '/long/{'a' * 506}...{'a' * 512}' (102406 characters) is too long: at most 4096 characters ({IN})",
    ),
    # a long value is shown whole, up to 1024 characters: the wrong part is at its end
    (
        "a 330-character data_in with ..",
        {"data_in": "{t}/" + "d" * 320 + "/../out"},
        f"rsa.data_in: '{{t}}/{'d' * 320}/../out' contains '..' ({IN})",
    ),
    # text that is not UTF-8, as Python holds undecodable bytes (surrogate
    # escapes) and as raw bytes
    (
        "data_in not UTF-8",
        {"data_in": "/tmp/in-\udcff\udcfe"},
        f"rsa.data_in: '/tmp/in-\\udcff\\udcfe' is not valid UTF-8 text ({IN})",
    ),
    (
        "data_in as bytes",
        {"data_in": b"/tmp/in-\xff"},
        f"rsa.data_in: b'/tmp/in-\\xff' is not a path ({IN})",
    ),
    # paths: the file system
    (
        "missing data_in",
        {"data_in": "{t}/missing"},
        f"rsa.data_in: {{t}}/missing: No such directory {CAN_READ}",
    ),
    (
        "data_in is a file",
        {"data_in": "{t}/file"},
        f"rsa.data_in: {{t}}/file: Not a directory {CAN_READ}",
    ),
    (
        "data_in below a file",
        {"data_in": "{t}/file/sub"},
        f"rsa.data_in: {{t}}/file: Not a directory {CAN_READ}",
    ),
    (
        "missing data_out",
        {"data_in": "{t}/in", "data_out": "{t}/missing"},
        f"rsa.data_out: {{t}}/missing: No such directory {CAN_WRITE}",
    ),
    (
        "data_out is a file",
        {"data_out": "{t}/file"},
        f"rsa.data_out: {{t}}/file: Not a directory {CAN_WRITE}",
    ),
    (
        "data_in is a link loop",
        {"data_in": "{t}/loop"},
        f"rsa.data_in: {{t}}/loop: Too many levels of symbolic links {CAN_READ}",
    ),
    (
        "data_out equals data_in",
        {"data_in": "{t}/in", "data_out": "{t}/in/"},
        "rsa.data_out: '{t}/in' is inside rsa.data_in '{t}/in' (stage out to a directory outside the inputs)",
    ),
    (
        "data_out inside data_in",
        {"data_in": "{t}/in", "data_out": "{t}/in/sub"},
        "rsa.data_out: '{t}/in/sub' is inside rsa.data_in '{t}/in' (stage out to a directory outside the inputs)",
    ),
    (
        "data_out inside data_in by a link",
        {"data_in": "{t}/in", "data_out": "{t}/outlink"},
        "rsa.data_out: {t}/outlink is inside rsa.data_in {t}/in once links are followed "
        "(stage out to a directory outside the inputs)",
    ),
    # permissions of the submitting user
    (
        "unreadable data_in",
        {"data_in": "{t}/unreadable"},
        f"rsa.data_in: {{t}}/unreadable: Permission denied (user {{u}} cannot read it) {CAN_READ}",
    ),
    (
        "unwritable data_out",
        {"data_out": "{t}/unwritable"},
        f"rsa.data_out: {{t}}/unwritable: Permission denied (user {{u}} cannot write to it) {CAN_WRITE}",
    ),
    (
        "data_in below a closed directory",
        {"data_in": "{t}/locked/deep"},
        f"rsa.data_in: {{t}}/locked: Permission denied (user {{u}} cannot enter it) {CAN_READ}",
    ),
    (
        "data_in linked into a closed directory",
        {"data_in": "{t}/sneaky"},
        f"rsa.data_in: {{t}}/private: Permission denied (user {{u}} cannot enter it) {CAN_READ}",
    ),
    # stage methods and scripts
    (
        "relative stage_in script",
        {"data_in": "{t}/in", "stage_in": "stage.sh"},
        f'rsa.stage_in: \'stage.sh\' is neither "copy", "tar" nor an absolute path ({METHOD})',
    ),
    (
        "unknown stage_out method",
        {"data_out": "{t}/out", "stage_out": "rsync"},
        f'rsa.stage_out: \'rsync\' is neither "copy", "tar" nor an absolute path ({METHOD})',
    ),
    (
        "stage_out is a number",
        {"data_out": "{t}/out", "stage_out": 1},
        f"rsa.stage_out: 1 is not a method or a path ({METHOD})",
    ),
    (
        "stage_out without data_out",
        {"data_in": "{t}/in", "stage_out": "tar"},
        "rsa.stage_out: 'tar' needs rsa.data_out too (the directory the stage-out works on)",
    ),
    (
        "stage_in script without data_in",
        {"data_out": "{t}/out", "stage_in": "{t}/stage.sh"},
        "rsa.stage_in: '{t}/stage.sh' needs rsa.data_in too (the directory the stage-in works on)",
    ),
    (
        "missing stage_in script",
        {"data_in": "{t}/in", "stage_in": "{t}/nope.sh"},
        f"rsa.stage_in: {{t}}/nope.sh: No such file {SCRIPT}",
    ),
    (
        "stage_out script is a directory",
        {"data_out": "{t}/out", "stage_out": "{t}/in"},
        f"rsa.stage_out: {{t}}/in: Not a regular file {SCRIPT}",
    ),
    (
        "stage_out script not executable",
        {"data_out": "{t}/out", "stage_out": "{t}/noexec.sh"},
        f"rsa.stage_out: {{t}}/noexec.sh: Permission denied (user {{u}} cannot execute it) {SCRIPT}",
    ),
    (
        "stage_in script not readable",
        {"data_in": "{t}/in", "stage_in": "{t}/noread.sh"},
        f"rsa.stage_in: {{t}}/noread.sh: Permission denied (user {{u}} cannot read it) {SCRIPT}",
    ),
    # sizes
    (
        "negative capacity",
        {"data_in": "{t}/in", "capacity": "-1G"},
        f"rsa.capacity: '-1G' is negative ({SIZE})",
    ),
    (
        "unit-less capacity",
        {"data_in": "{t}/in", "capacity": 16},
        f"rsa.capacity: 16 has no unit ({SIZE})",
    ),
    (
        "unit-less capacity string",
        {"data_in": "{t}/in", "capacity": "1048576"},
        f"rsa.capacity: '1048576' has no unit ({SIZE})",
    ),
    (
        "capacity with a bad unit",
        {"data_in": "{t}/in", "capacity": "16X"},
        f"rsa.capacity: '16X' is not a size ({SIZE})",
    ),
    (
        "zero capacity",
        {"data_in": "{t}/in", "capacity": "0G"},
        f"rsa.capacity: '0G' is not a usable RAM-disk size ({SIZE})",
    ),
    (
        "capacity is true",
        {"data_in": "{t}/in", "capacity": True},
        f"rsa.capacity: true is not a size ({SIZE})",
    ),
    (
        "capacity larger than the pool",
        {"data_in": "{t}/in", "capacity": "129M"},
        "rsa.capacity: '129M' is more than the RSA pool can ever hold (at most 128M: 2 RSA node(s) x 64M)",
    ),
    (
        "absurd capacity",
        {"data_in": "{t}/in", "capacity": "99999P"},
        "rsa.capacity: '99999P' is more than the RSA pool can ever hold (at most 128M: 2 RSA node(s) x 64M)",
    ),
    (
        "huge capacity string",
        {"data_in": "{t}/in", "capacity": "9" * 1000 + "G"},
        f"rsa.capacity: '{'9' * 1000}G' is too long: at most 64 characters ({SIZE})",
    ),
    # durations
    (
        "negative delay",
        {"data_in": "{t}/in", "delay": -5},
        f"rsa.delay: -5 is negative ({DELAY})",
    ),
    (
        "negative delay string",
        {"data_in": "{t}/in", "delay": "-5m"},
        f"rsa.delay: '-5m' is negative ({DELAY})",
    ),
    (
        "delay is not a duration",
        {"data_in": "{t}/in", "delay": "soon"},
        f"rsa.delay: 'soon' is not a duration ({DELAY})",
    ),
    (
        "delay in years",
        {"data_in": "{t}/in", "delay": "10y"},
        f"rsa.delay: '10y' is not a duration ({DELAY})",
    ),
    (
        "delay of 10 years in seconds",
        {"data_in": "{t}/in", "delay": 315360000},
        f"rsa.delay: 315360000 is more than 30 days ({DELAY})",
    ),
    (
        "delay of 3650 days",
        {"data_in": "{t}/in", "delay": "3650d"},
        f"rsa.delay: '3650d' is more than 30 days ({DELAY})",
    ),
    (
        "delay is not a number",
        {"data_in": "{t}/in", "delay": float("nan")},
        f"rsa.delay: nan is not a duration ({DELAY})",
    ),
    (
        "delay is a list",
        {"data_in": "{t}/in", "delay": [30]},
        f"rsa.delay: [30] is not a duration ({DELAY})",
    ),
    # choices
    (
        "bad on_late",
        {"data_in": "{t}/in", "on_late": "never"},
        f"rsa.on_late: 'never' is not allowed ({ON_LATE})",
    ),
    (
        "on_late is true",
        {"data_in": "{t}/in", "on_late": True},
        f"rsa.on_late: true is not allowed ({ON_LATE})",
    ),
    (
        "bad verify",
        {"data_in": "{t}/in", "verify": "md5"},
        f"rsa.verify: 'md5' is not allowed ({VERIFY})",
    ),
    (
        "bad paths",
        {"data_in": "{t}/in", "paths": "overlay"},
        f"rsa.paths: 'overlay' is not allowed ({PATHS})",
    ),
    (
        "paths=bind with data_in inside data_out",
        {"data_in": "{t}/out/in", "data_out": "{t}/out", "paths": "bind"},
        "rsa.paths: 'bind' cannot be done: rsa.data_in is inside rsa.data_out (the output area shown at "
        f"data_out would hide it); use rsa.paths=env ({PATHS})",
    ),
    # keys that mean nothing without others: refused, never ignored
    (
        "delay alone",
        {"delay": 5},
        "rsa.delay: 5 needs rsa.data_in and rsa.data_out too "
        "(the staged inputs are dropped after the delay to make room for outputs)",
    ),
    (
        "delay without data_out",
        {"data_in": "{t}/in", "delay": "5m"},
        "rsa.delay: '5m' needs rsa.data_out too (the staged inputs are dropped after the delay to make room for outputs)",
    ),
    (
        "paths alone",
        {"paths": "env"},
        "rsa.paths: 'env' needs rsa.data_in or rsa.data_out too (they are the paths it is about)",
    ),
    (
        "verify alone",
        {"verify": "checksum"},
        "rsa.verify: 'checksum' needs rsa.data_in or rsa.data_out too (it checks what is staged)",
    ),
    (
        "on_late alone",
        {"on_late": "wait"},
        "rsa.on_late: 'wait' needs rsa.data_in, rsa.data_out or rsa.capacity too (without them the job gets no RAM disk)",
    ),
    (
        "stage_in=copy without data_in",
        {"data_out": "{t}/out", "stage_in": "copy"},
        "rsa.stage_in: 'copy' needs rsa.data_in too (the directory the stage-in works on)",
    ),
    (
        "scratch capacity larger than the pool",
        {"capacity": "200M"},
        "rsa.capacity: '200M' is more than the RSA pool can ever hold (at most 128M: 2 RSA node(s) x 64M)",
    ),
    (
        "huge on_late",
        {"data_in": "{t}/in", "on_late": "w" * 100000},
        f"rsa.on_late: '{'w' * 512}...{'w' * 512}' (100000 characters) is not allowed ({ON_LATE})",
    ),
]
