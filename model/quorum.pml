/*
 * quorum.pml: one lock kept on N = 3 independent Redis masters (quorum.go,
 * NewQuorum), two clients, one fenced resource. README.md maps each part
 * to the code and explains the bounds.
 *
 * Time is abstracted away; what it decides is kept as nondeterminism:
 *   - a lock set by an attempt cannot expire while that attempt can still
 *     succeed: it was set after the attempt's start and expires TTL later
 *     on its node, while the attempt succeeds only if it ends within
 *     TTL - drift of its start. An attempt may run out of validity at any
 *     moment, and then gives up; the locks of attempts that have ended
 *     (leases included) may expire at any moment;
 *   - the clock floor, max(stored + 1, TIME), gives stored + 1 or one
 *     more (the node's clock ahead of its counter).
 * With RESTART, one node (a minority) restarts without persistence,
 * losing its locks and its counter, and serves again with its clock past
 * every token issued before: the clock-floor assumption, stated directly
 * (single.pml checks it in terms of clock error and outage).
 *
 * Properties: P1 tokens increase (an acquisition that begins after a
 * lease completed gets a greater token), P2 no two leases share a token
 * (NO_P2 leaves it out), P3/P3b (fence.pml), P4 released by its owner
 * only.
 * Variant WB_OWNER_CHECK: the write-back is accepted only by nodes where
 * the attempt still holds the lock.
 * Negative controls: NO_WRITEBACK, and TIE_NO_LEASE in fence.pml.
 */

#ifndef ATTEMPTS
#define ATTEMPTS 2	/* acquisition attempts in one history */
#endif
#ifdef COUNTERS_AHEAD
#define CLOCK_AHEAD	false	/* every node's counter is ahead of its clock */
#else
#define CLOCK_AHEAD	true
#endif
#define TOKMAX	30	/* tokens must fit the 32-bit ghost set "used" */
#define N	3
#define MAJ	2

#define IDLE	0
#define R1	1	/* round 1: the acquire script on every node */
#define WB	2	/* round 2: quorum_writeback.lua on every node */
#define HOLD	3

/* P3 by tokens: a lease is accepted only with a token above every token
 * that an accepted lease had seen completed before it began (fl). This
 * implies P3 in completion order, b and d of fence.pml, given P1. */
#define KEEP_MAXB
#define KEEP_GONE
#define STALE_OK(b, d)	((d) > resMaxB)
#include "fence.pml"

bool up[N] = true;
bool restarted;		/* the faulty node has restarted: node 2, as the
			   clients treat the nodes alike */
byte rfloor;		/* its clock once back: no token below this */
#define FAULTY	2
byte lockOwn[N];	/* owner value = attempt number, 0 = absent */
byte ctr[N];		/* token counter, 0 = absent */

/* per client: the attempt, then the lease */
byte ph[2];
byte asked[2];		/* nodes this round has asked */
byte yes[2], no[2];
byte tok[2];		/* round 1: greatest token issued; then the token */
byte own[2];		/* owner value of the attempt = lease ID */
bool fen[2];		/* tok/own are a lease's fence, kept after release */
byte fl[2];		/* ghost: greatest token of leases completed before start */

/* ghosts */
byte att;		/* attempts so far */
byte doneMax;		/* greatest token of a completed lease */
#ifndef NO_P2
int used;		/* bit t: some lease has token t */
#endif

#define BIT(i)		(1 << (i))
bool probe;		/* reachability probes, see single.pml */
#define PROBE(cond)	assert(probe || !(cond))
#ifdef WB_OWNER_CHECK
#define WB_HELD(i, c)	(lockOwn[i] == own[c])
#else
#define WB_HELD(i, c)	true
#endif
#define RUNNING(c)	(ph[c] == R1 || ph[c] == WB)
/* a lock that may expire: not one of an attempt still running */
#define MAY_EXPIRE(o)	(!(RUNNING(0) && own[0] == (o)) && !(RUNNING(1) && own[1] == (o)))

/* i := a node whose condition holds; blocks, as a whole, if none does */
#define PICK(c0, c1, c2) \
	if \
	:: c0 -> i = 0 \
	:: c1 -> i = 1 \
	:: c2 -> i = 2 \
	fi

/* rfloor := max(rfloor, every counter + 1): counters only grow until
 * the restart, so this is one more than every token issued so far */
inline floorUp() {
	for (j : 0 .. N - 1) {
		if
		:: ctr[j] >= rfloor -> rfloor = ctr[j] + 1
		:: else -> skip
		fi
	}
	j = 0
}

/* Canonical values for what can no longer matter: a lock whose attempt
 * no client runs or holds any more is only waiting to expire (STALE);
 * an old fence that the resource will never accept again is dropped. */
#define STALE	15
#define LIVE(o)	((ph[0] != IDLE && own[0] == (o)) || (ph[1] != IDLE && own[1] == (o)))
inline tidy() {
	for (j : 0 .. N - 1) {
		if
		:: lockOwn[j] != 0 && lockOwn[j] != STALE && !LIVE(lockOwn[j]) -> lockOwn[j] = STALE
		:: else -> skip
		fi
	}
	for (j : 0 .. 1) {
		if
		:: ph[j] == IDLE && fen[j] && !FENCE_OK(tok[j], own[j]) ->
			fen[j] = false; tok[j] = 0; own[j] = 0; fl[j] = 0
		:: else -> skip
		fi
	}
	j = 0
}

/* release.lua on every node, each request may fail; inside atomic */
inline releaseEach(c) {
	for (i : 0 .. N - 1) {
		if
		:: up[i] && lockOwn[i] == own[c] ->
			assert(lockOwn[i] == own[c]);	/* P4: released by its owner only */
			lockOwn[i] = 0
		:: skip
		fi
	}
	i = 0
}

inline fail(c) {
	releaseEach(c);
	printf("@ client %d attempt %d: failed, released every node\n", c, own[c]);
	asked[c] = 0; yes[c] = 0; no[c] = 0; fl[c] = 0; tok[c] = 0; ph[c] = IDLE;
	tidy()
}

proctype client(byte c) {
	byte i, j, t;
	do
	:: atomic {
			ph[c] == IDLE && att < ATTEMPTS ->
			att++; own[c] = att; tok[c] = 0; fen[c] = false;
			fl[c] = doneMax; ph[c] = R1;
			printf("@ client %d attempt %d: starts (greatest token of a completed lease: %d)\n", c, att, doneMax);
			tidy()
		}
	::	/* one node answers round 1: acquire.lua */
		atomic {
			PICK(ph[c] == R1 && (asked[c] & BIT(0)) == 0,
			     ph[c] == R1 && (asked[c] & BIT(1)) == 0,
			     ph[c] == R1 && (asked[c] & BIT(2)) == 0);
			asked[c] = asked[c] | BIT(i);
			if
			:: up[i] && lockOwn[i] == 0 ->
				/* token = max(stored + 1, clock) */
				t = ctr[i] + 1;
				if
				:: i == FAULTY && rfloor > t -> t = rfloor
				:: else -> skip
				fi;
				if
				:: skip
				:: CLOCK_AHEAD -> t++	/* the node's clock is ahead */
				fi;
				assert(t < TOKMAX);	/* a bound of the model, not a property */
				ctr[i] = t;
				if
				:: i == FAULTY && t >= rfloor -> rfloor = 0
				:: else -> skip
				fi;
				lockOwn[i] = own[c]; yes[c]++;
				printf("@ client %d attempt %d: node %d locked, issued %d\n", c, own[c], i, t);
				if
				:: t > tok[c] -> tok[c] = t
				:: else -> skip
				fi
			:: else -> no[c]++;	/* held by another owner, or down */
				printf("@ client %d attempt %d: node %d refused\n", c, own[c], i)
			fi;
			if
			:: yes[c] >= MAJ ->
				/* decided: requests still out are dropped; the token
				 * is one more than the greatest */
				tok[c] = tok[c] + 1;
				printf("@ client %d attempt %d: majority locked, token %d\n", c, own[c], tok[c]);
				asked[c] = 0; yes[c] = 0; no[c] = 0;
#ifdef NO_WRITEBACK
				yes[c] = MAJ;
#endif
				ph[c] = WB
			:: no[c] > N - MAJ -> fail(c)
			:: else -> skip
			fi;
			i = 0; t = 0
		}
	::	/* one node answers round 2: quorum_writeback.lua, raise only
		 * if lower */
		atomic {
			PICK(ph[c] == WB && yes[c] < MAJ && (asked[c] & BIT(0)) == 0,
			     ph[c] == WB && yes[c] < MAJ && (asked[c] & BIT(1)) == 0,
			     ph[c] == WB && yes[c] < MAJ && (asked[c] & BIT(2)) == 0);
			asked[c] = asked[c] | BIT(i);
			if
			:: up[i] && ctr[i] < tok[c] && WB_HELD(i, c) ->
				ctr[i] = tok[c]; yes[c]++;
				if
				:: i == FAULTY && tok[c] >= rfloor -> rfloor = 0
				:: else -> skip
				fi;
				printf("@ client %d attempt %d: node %d took write-back %d\n", c, own[c], i, tok[c])
			:: else -> no[c]++;
				printf("@ client %d attempt %d: node %d refused write-back %d (stores %d)\n", c, own[c], i, tok[c], ctr[i])
			fi;
			if
			:: no[c] > N - MAJ -> fail(c)
			:: else -> skip
			fi;
			i = 0
		}
	::	/* a majority accepted, within the validity: a lease */
		atomic {
			ph[c] == WB && yes[c] >= MAJ ->
			assert(tok[c] > fl[c]);	/* P1: tokens increase */
#ifdef PROBE_AFTER_RESTART	/* a lease after an earlier one and the restart,
				   node 2 back and in use */
			PROBE(restarted && up[FAULTY] && ctr[FAULTY] != 0 && fl[c] != 0);
#endif
#ifndef NO_P2
			assert((used & (1 << tok[c])) == 0);	/* P2: no two leases share a token */
			used = used | (1 << tok[c]);
#endif
			if
			:: tok[c] > doneMax -> doneMax = tok[c]
			:: else -> skip
			fi;
			printf("@ client %d attempt %d: LEASE, token %d\n", c, own[c], tok[c]);
			asked[c] = 0; yes[c] = 0; no[c] = 0; fen[c] = true; ph[c] = HOLD
		}
	::	/* the validity runs out: give up, releasing every node */
		atomic { RUNNING(c) -> fail(c) }
	::	/* Release: compare-and-delete on every node */
		atomic {
			ph[c] == HOLD ->
			releaseEach(c); ph[c] = IDLE;
			printf("@ client %d lease %d: released\n", c, own[c]);
			tidy()
		}
	::	/* a fenced access with the latest lease's fence, at any time,
		 * also after the lease ended (a paused or delayed writer) */
		atomic {
			fen[c] ->
			printf("@ client %d: writes with lease %d, token %d\n", c, own[c], tok[c]);
			access(tok[c], own[c], fl[c], tok[c]);
			tidy()
		}
	od
}

proctype env() {
	byte i, j;
	do
	:: atomic {
		/* a lock expires */
		PICK(lockOwn[0] != 0 && MAY_EXPIRE(lockOwn[0]),
		     lockOwn[1] != 0 && MAY_EXPIRE(lockOwn[1]),
		     lockOwn[2] != 0 && MAY_EXPIRE(lockOwn[2]));
		printf("@ node %d: lock of attempt %d expired\n", i, lockOwn[i]);
		lockOwn[i] = 0; i = 0
	   }
#ifdef RESTART
	:: atomic {
		/* the faulty node restarts without persistence ... */
		!restarted ->
		restarted = true; floorUp();
		up[FAULTY] = false; lockOwn[FAULTY] = 0; ctr[FAULTY] = 0;
		printf("@ node %d: crashed, its data lost\n", FAULTY)
	   }
	:: atomic {
		/* ... and serves again, its clock past every token issued */
		restarted && !up[FAULTY] -> up[FAULTY] = true; floorUp();
		printf("@ node %d: back, empty, its clock at %d\n", FAULTY, rfloor)
	   }
#endif
	od
}

init {
	atomic {
		run env();
		run client(0);
		run client(1)
	}
}
