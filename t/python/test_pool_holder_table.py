"""The holder's table (flux_rsa.pool.holdertable), driven with a plain
object in place of a holder: no Flux.  Facts arrive in every order a pool
can deliver them; the service must hear holder-alloc, holder-start,
ramdisk-built and holder-end each at most once, in that order, each only
after its fact, and holder-end last and only once the job (and its sweep)
ended."""

import itertools

import pytest

from flux_rsa.pool import holdertable, protocol
from flux_rsa.pool.holdertable import ROWS, State

ORDER = [protocol.HOLDER_ALLOC, protocol.HOLDER_START, protocol.RAMDISK_BUILT]
TELLS = {
    holdertable.tell_alloc: protocol.HOLDER_ALLOC,
    holdertable.tell_start: protocol.HOLDER_START,
    holdertable.tell_built: protocol.RAMDISK_BUILT,
    holdertable.tell_end: protocol.HOLDER_END,
}


class Sweep:
    def __init__(self):
        self.ended = False


class FakeHolder:
    """The facts a holder gathers, and its steps, recorded."""

    def __init__(self):
        self.state = State.PENDING
        self.R = None
        self.started = False
        self.path = None
        self.ended = False
        self.left = False  # leftovers()
        self.up = set()  # reachable()
        self.sweeper = None
        self.told = []  # notification kinds, in order
        self.payloads = []
        self.steps = []  # other steps, in order
        self.applied = []  # rows, in order

    # facts
    nodes = ["rsa0"]
    granted = 4096

    def leftovers(self):
        return self.left

    def reachable(self):
        return self.up

    def volume(self):
        return None

    def error(self):
        return None

    def kept_path(self):
        return None

    # steps
    def tell(self, kind, **fields):
        assert kind not in self.told, f"{kind} told twice"
        self.told.append(kind)
        self.payloads.append(protocol.notification(kind, 1, jobid=7, gen=1, **fields))

    def take_over_kept(self):
        self.steps.append("take_over_kept")

    def note_unreachable(self):
        self.steps.append("note_unreachable")

    def sweep(self):
        assert self.sweeper is None, "swept twice"
        self.sweeper = Sweep()
        self.steps.append("sweep")

    def give_up_kept(self):
        assert (
            self.state is State.ENDED
        ), "a kept RAM disk is given up while the holder still holds it"
        self.steps.append("give_up_kept")

    def forget(self):
        assert self.told[-1] == protocol.HOLDER_END
        self.steps.append("forget")

    def advance(self):
        self.applied += holdertable.advance(self)


def arrive(h, facts):
    """Facts that come together (one update: the last stdout line is read
    when the job ends, an R looked up late comes after the start event)."""
    for fact in facts:
        learn(h, fact)
    h.advance()


def learn(h, fact):
    if fact == "R":
        h.R = {"execution": {}}
    elif fact == "start":
        h.started = True
    elif fact == "built":
        h.path = "/ram/7.1"
    elif fact == "swept":
        h.sweeper.ended = True
    else:  # how the job ended
        h.ended = True
        h.left = fact != "clean"
        h.up = {0} if fact == "leaving-reachable" else set()


ENDS = [None, "clean", "leaving-reachable", "leaving-unreachable"]


def scenarios():
    """Every order of the job's facts (the R, the start event and the
    built line come on separate watches), then how the job ended, then
    the sweep's end when one runs."""
    for n in range(4):
        for facts in itertools.permutations(["R", "start", "built"], n):
            for end in ENDS:
                tail = [] if end is None else [end]
                if end == "leaving-reachable":
                    yield [*facts, *tail]  # still sweeping
                    tail.append("swept")
                yield [*facts, *tail]


def batches(facts):
    """Every way to cut ``facts`` into runs that come together (the sweep
    ends after it started: on its own)."""
    for cuts in itertools.product([False, True], repeat=max(len(facts) - 1, 0)):
        out, run = [], [facts[0]] if facts else []
        for fact, cut in zip(facts[1:], cuts):
            if cut or fact == "swept":
                out.append(run)
                run = []
            run.append(fact)
        yield out + ([run] if run else [])


def run(groups):
    h = FakeHolder()
    for group in groups:
        arrive(h, group)
        assert holdertable.advance(h) == [], "advance stopped before the table settled"
    return h


def expected(facts):
    got = set(facts)
    told = []
    for kind, needs in zip(ORDER, (["R"], ["R", "start"], ["R", "start", "built"])):
        if got.issuperset(needs):
            told.append(kind)
    ended = got & {"clean", "leaving-unreachable", "swept"}
    return told + ([protocol.HOLDER_END] if ended else [])


@pytest.mark.parametrize(
    "facts", list(scenarios()), ids=lambda f: ",".join(f) or "nothing"
)
def test_notifications_go_out_once_in_order_after_their_facts(facts):
    for groups in batches(facts):
        h = run(groups)
        assert h.told == expected(facts), groups
        # each one as soon as its fact (and the one before it) is there
        for i in range(len(groups) + 1):
            assert run(groups[:i]).told == expected(sum(groups[:i], [])), groups[:i]
        if protocol.HOLDER_END in h.told:
            assert h.state is State.ENDED and h.steps[-1] == "forget"
        assert h.steps.count("sweep") == (1 if "leaving-reachable" in facts else 0)
        assert ("note_unreachable" in h.steps) == any(
            f.startswith("leaving") for f in facts
        )


def test_every_row_is_reached():
    reached = set()
    for facts in scenarios():
        reached.update(id(row) for row in run([[fact] for fact in facts]).applied)
    missing = [row for row in ROWS if id(row) not in reached]
    assert missing == []


def test_every_row_moves_forward_and_tells_at_most_one_notification():
    order = list(State)
    for row in ROWS:
        assert all(order.index(row.to) > order.index(s) for s in row.states), row
        assert len([s for s in row.steps if s in TELLS]) <= 1, row


def test_a_state_is_entered_with_the_same_notification_by_every_row():
    for state in State:
        told = {
            tuple(TELLS[s] for s in row.steps if s in TELLS)
            for row in ROWS
            if row.to is state
        }
        assert len(told) <= 1, (state, told)
    assert {row.to for row in ROWS} == set(State) - {State.PENDING}


def test_nothing_happens_after_holder_end():
    assert not [row for row in ROWS if State.ENDED in row.states]
    h = run([["R", "start", "built", "clean"]])
    told = list(h.told)
    for fact in ["R", "start", "built", "clean"]:
        arrive(h, [fact])
    assert h.told == told


def test_the_payloads_carry_every_field_the_protocol_names():
    h = run([["R", "start", "built"], ["leaving-reachable"], ["swept"]])
    assert [p["kind"] for p in h.payloads] == ORDER + [protocol.HOLDER_END]
    for p in h.payloads:
        assert set(protocol.NOTIFY_FIELDS[p["kind"]]) <= set(p)


def test_a_holder_canceled_while_pending_tells_holder_end_alone():
    h = run([["clean"]])
    assert h.told == [protocol.HOLDER_END]
    assert h.steps == ["give_up_kept", "forget"]
