/*
 * quorum.pml: one lock kept on N = 3 independent Redis masters (quorum.go,
 * NewQuorum), two clients, one fenced resource: the proposal protocol.
 * README.md maps each part to the code and explains the bounds.
 *
 * An attempt proposes a token P to every node; node i, if the lock is
 * free, takes it and issues t = max(stored + 1, clock, min(P, clock +
 * CAP)) (lua/acquire.lua). Once a majority locked, the token is the greatest
 * issued; if a majority issued it, that is the lease (one round trip),
 * else it is written back (lua/quorum_writeback.lua) to the nodes that
 * issued less, and a majority must accept: raise only if lower, and only
 * where this attempt holds the lock (the owner check). Requests still out
 * when a round is decided may land later: a late acquire takes the lock
 * and issues, a late write-back raises a counter; a lease also writes its
 * token back, unwaited, to the nodes that did not issue it.
 *
 * Time: the true time now (0..TMAX) moves on at any moment; a node's
 * clock is anywhere within DMAX of it at each script (a clock stepped
 * back or forward within DMAX). Lock expiry is kept apart from time, as
 * nondeterminism, soundly: a lock taken by an attempt cannot expire while
 * that attempt can still succeed (it was set after the attempt's start
 * and lives TTL on its node, while the attempt succeeds only within TTL -
 * drift of its start), and the locks of attempts that ended, leases
 * included, may expire at any moment. An attempt may run out of validity
 * at any moment, and then gives up, releasing every node.
 *
 * With RESTART, one node (a minority) restarts without persistence,
 * losing its locks and its counter, and serves again OUT or more after
 * it crashed, with its clock (within DMAX) as its only floor. OUT is
 * longer than the cap plus the clocks' disagreement: the clock-floor
 * assumption, in time (FAILURE_MODEL.md); SHORT_OUTAGE breaks it.
 *
 * Properties: P1 tokens increase (an acquisition that begins after a
 * lease completed gets a greater token), P2 no two leases share a token
 * (NO_P2 leaves it out), P3/P3b (fence.pml), P4 released by its owner only.
 * Negative controls: NO_WB_OWNER_CHECK (the write-back before the fix),
 * NO_CAP (a proposal raises a token without bound), NO_STORED_FLOOR (the
 * token from the clock and the proposal alone, without stored + 1),
 * NO_WRITEBACK (the greatest token without a write-back), SHORT_OUTAGE,
 * and TIE_NO_LEASE in fence.pml.
 */

#ifndef ATTEMPTS
#define ATTEMPTS 2	/* acquisition attempts in one history */
#endif
#ifndef TMAX
#define TMAX 8
#endif
#ifndef DMAX
#define DMAX	0	/* a node's clock is within DMAX of true time */
#endif
#define CAP	2	/* lua/acquire.lua: at most CAP above the node's clock */
#define LEAD	1	/* quorum.go: the proposal, CAP > LEAD above the client's clock */
/* The outage: a restarted node's clock (>= now - DMAX) must pass every
 * token issued before the crash (<= its time + DMAX + CAP, + 1 for each
 * further script on one node within one time unit, which a µs clock
 * would not allow: ATTEMPTS - 1). */
#ifdef SHORT_OUTAGE
#define OUT	CAP
#else
#define OUT	(2 * DMAX + CAP + ATTEMPTS)
#endif
#define FAR	(TMAX + OUT + DMAX + 1)	/* proposed by a client clock far ahead: above every clock */
/* COUNTERS_AHEAD: every counter starts ahead of every clock (by AHEAD or
 * AHEAD + 1), as in TestQuorum_tokensAcrossMajorities: only the counters,
 * not the clocks, carry tokens forward. */
#define AHEAD	(TMAX + DMAX + CAP + 1)
#define TOKMAX	30	/* tokens must fit the 32-bit ghost set "used" */
#define N	3
#define MAJ	2

#define IDLE	0
#define R1	1	/* round 1: lua/acquire.lua on every node */
#define WB	2	/* round 2: lua/quorum_writeback.lua to the nodes that issued less */
#define HOLD	3

/* P3 by tokens: a lease is accepted only with a token above every token
 * that an accepted lease had seen completed before it began (fl). This
 * implies P3 in completion order, b and d of fence.pml, given P1. */
#define KEEP_MAXB
#define KEEP_GONE
#define STALE_OK(b, d)	((d) > resMaxB)
#include "fence.pml"

byte now;		/* true time */
bool up[N] = true;
bool restarted;		/* the faulty node has crashed: node 2, as the
			   clients treat the nodes alike */
byte crashAt;		/* when it crashed, while it is down */
#define FAULTY 2
byte lockOwn[N];	/* owner value = attempt number, 0 = absent */
byte ctr[N];		/* token counter, 0 = absent */

/* per client: the attempt, then the lease */
byte ph[2];
byte prop[2];		/* the attempt's proposal */
byte asked[2];		/* R1: nodes that answered; WB, HOLD: nodes sent the write-back */
byte late[2];		/* R1 requests still out after the round was decided */
byte yes[2], no[2];
byte tok[2];		/* R1: greatest token issued; then the token */
byte atTok[2];		/* R1: nodes that issued tok */
byte own[2];		/* owner value of the attempt = lease ID */
bool fen[2];		/* tok/own are a lease's fence, kept after release */
byte fl[2];		/* ghost: greatest token of leases completed before start */
#ifdef PROBE_FAST
bool slow[2];		/* ghost: a write-back was tallied */
#endif

/* ghosts */
byte att;		/* attempts so far */
byte doneMax;		/* greatest token of a completed lease */
#ifndef NO_P2
int used;		/* bit t: some lease has token t */
#endif

#define BIT(i)		(1 << (i))
#define COUNT(m)	(((m) & 1) + (((m) >> 1) & 1) + (((m) >> 2) & 1))
bool probe;		/* reachability probes, see single.pml */
#define PROBE(cond)	assert(probe || !(cond))
#ifdef NO_WB_OWNER_CHECK
#define WB_HELD(i, c)	true
#else
#define WB_HELD(i, c)	(lockOwn[i] == own[c])
#endif
#define RUNNING(c)	(ph[c] == R1 || ph[c] == WB)
#ifdef NO_LATE
#define WBOUT(c)	(ph[c] == WB)
#else
#define WBOUT(c)	(ph[c] == WB || ph[c] == HOLD)	/* write-backs still out after the lease */
#endif
/* a lock that may expire: not one of an attempt still running */
#define MAY_EXPIRE(o)	(!(RUNNING(0) && own[0] == (o)) && !(RUNNING(1) && own[1] == (o)))

/* i := a node whose condition holds; blocks, as a whole, if none does */
#define PICK(c0, c1, c2) \
	if \
	:: c0 -> i = 0 \
	:: c1 -> i = 1 \
	:: c2 -> i = 2 \
	fi

/* lua/acquire.lua on node i for client c's attempt, the lock free: take it
 * and issue t = max(stored + 1, clock, min(proposal, clock + CAP)), the
 * clock anywhere within DMAX of now; inside atomic */
inline issue(c, i) {
	t = now + DMAX;
	do
	:: t > 0 && t + DMAX > now -> t--
	:: break
	od;
#ifdef NO_CAP
	p = prop[c];
#else
	p = t + CAP;
	if
	:: prop[c] < p -> p = prop[c]
	:: else -> skip
	fi;
#endif
#ifndef NO_STORED_FLOOR
	if
	:: ctr[i] + 1 > t -> t = ctr[i] + 1
	:: else -> skip
	fi;
#endif
	if
	:: p > t -> t = p
	:: else -> skip
	fi;
	assert(t < TOKMAX);	/* a bound of the model, not a property */
	ctr[i] = t; lockOwn[i] = own[c];
	p = 0
}

/* Canonical values for what can no longer matter: a lock whose attempt
 * no client runs or holds any more is only waiting to expire (STALE); an
 * old fence that the resource will never accept again is dropped; what
 * an attempt no longer uses is zeroed. */
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
		fi;
		if
		:: ph[j] != R1 && late[j] == 0 -> prop[j] = 0
		:: else -> skip
		fi
	}
	j = 0
}

/* lua/release.lua on every node, each request may fail; inside atomic */
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

/* An attempt or lease ends: the requests still out are dropped (a late
 * acquire, landing just before the release waits for it, is an
 * interleaving of its own). */
inline ended(c) {
	asked[c] = 0; late[c] = 0; atTok[c] = 0; yes[c] = 0; no[c] = 0; ph[c] = IDLE;
	tidy()
}

inline fail(c) {
	releaseEach(c);
	printf("@ client %d attempt %d: failed, released every node\n", c, own[c]);
	fl[c] = 0; tok[c] = 0;
	ended(c)
}

proctype client(byte c) {
	byte i, j, t, p;
	do
	:: atomic {
			ph[c] == IDLE && att < ATTEMPTS ->
			att++; own[c] = att; tok[c] = 0; fen[c] = false;
			fl[c] = doneMax; ph[c] = R1;
			/* the client's clock: right (a node that runs the
			 * script later, or whose clock is ahead, finds the
			 * proposal behind), or far ahead */
			if
			:: prop[c] = now + LEAD
			:: prop[c] = FAR
			fi;
			printf("@ t=%d client %d attempt %d: starts, proposes %d (greatest token of a completed lease: %d)\n", now, c, att, prop[c], doneMax);
			tidy()
		}
	::	/* one node answers round 1: lua/acquire.lua */
		atomic {
			PICK(ph[c] == R1 && (asked[c] & BIT(0)) == 0,
			     ph[c] == R1 && (asked[c] & BIT(1)) == 0,
			     ph[c] == R1 && (asked[c] & BIT(2)) == 0);
			asked[c] = asked[c] | BIT(i);
			if
			:: up[i] && lockOwn[i] == 0 ->
				issue(c, i);
				yes[c]++;
				printf("@ t=%d client %d attempt %d: node %d locked, issued %d\n", now, c, own[c], i, t);
				if
				:: t > tok[c] -> tok[c] = t; atTok[c] = BIT(i)
				:: t == tok[c] -> atTok[c] = atTok[c] | BIT(i)
				:: else -> skip
				fi
			:: else -> no[c]++;	/* held by another owner, or down */
				printf("@ t=%d client %d attempt %d: node %d refused\n", now, c, own[c], i)
			fi;
			if
			:: yes[c] >= MAJ ->
				/* decided: the greatest token; the nodes that
				 * issued it have accepted it */
				late[c] = 7 & ~asked[c];
#ifdef PROBE_FAST
				slow[c] = false;
#endif
				asked[c] = atTok[c]; yes[c] = COUNT(atTok[c]); no[c] = 0; atTok[c] = 0;
#ifdef NO_WRITEBACK
				yes[c] = MAJ;
#endif
				printf("@ t=%d client %d attempt %d: majority locked, token %d, issued by %d nodes\n", now, c, own[c], tok[c], COUNT(asked[c]));
				ph[c] = WB
			:: no[c] > N - MAJ -> fail(c)
			:: else -> skip
			fi;
			i = 0; t = 0
		}
#ifndef NO_LATE
	::	/* a round-1 request still out lands: takes the lock, issues,
		 * is not tallied */
		atomic {
			PICK((ph[c] == WB || ph[c] == HOLD) && (late[c] & BIT(0)) != 0,
			     (ph[c] == WB || ph[c] == HOLD) && (late[c] & BIT(1)) != 0,
			     (ph[c] == WB || ph[c] == HOLD) && (late[c] & BIT(2)) != 0);
			late[c] = late[c] & ~BIT(i);
			if
			:: up[i] && lockOwn[i] == 0 ->
				issue(c, i);
				printf("@ t=%d client %d attempt %d: late, node %d locked, issued %d\n", now, c, own[c], i, t)
			:: else -> skip
			fi;
			i = 0; t = 0;
			tidy()
		}
#endif
	::	/* one node answers the write-back, lua/quorum_writeback.lua: in
		 * round 2, or after the lease, unwaited */
		atomic {
			PICK(WBOUT(c) && (asked[c] & BIT(0)) == 0,
			     WBOUT(c) && (asked[c] & BIT(1)) == 0,
			     WBOUT(c) && (asked[c] & BIT(2)) == 0);
			asked[c] = asked[c] | BIT(i);
			if
			:: up[i] && ctr[i] < tok[c] && WB_HELD(i, c) ->
				ctr[i] = tok[c];
				if
				:: ph[c] == WB -> yes[c]++
#ifdef PROBE_FAST
					; slow[c] = true
#endif
				:: else -> skip
				fi;
				printf("@ t=%d client %d attempt %d: node %d took write-back %d\n", now, c, own[c], i, tok[c])
			:: else ->
				if
				:: ph[c] == WB -> no[c]++
				:: else -> skip
				fi;
				printf("@ t=%d client %d attempt %d: node %d refused write-back %d (stores %d, lock of %d)\n", now, c, own[c], i, tok[c], ctr[i], lockOwn[i])
			fi;
			if
			:: ph[c] == WB && no[c] > N - MAJ -> fail(c)
			:: else -> tidy()
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
#ifdef PROBE_FAST	/* a lease in one round, after an earlier lease */
			PROBE(!slow[c] && fl[c] != 0);
#endif
#ifndef NO_P2
			assert((used & (1 << tok[c])) == 0);	/* P2: no two leases share a token */
			used = used | (1 << tok[c]);
#endif
			if
			:: tok[c] > doneMax -> doneMax = tok[c]
			:: else -> skip
			fi;
			printf("@ t=%d client %d attempt %d: LEASE, token %d\n", now, c, own[c], tok[c]);
			yes[c] = 0; no[c] = 0; fen[c] = true; ph[c] = HOLD;
			tidy()
		}
	::	/* the validity runs out: give up, releasing every node */
		atomic { RUNNING(c) -> fail(c) }
	::	/* Release: compare-and-delete on every node */
		atomic {
			ph[c] == HOLD ->
			releaseEach(c);
			printf("@ t=%d client %d lease %d: released\n", now, c, own[c]);
			ended(c)
		}
#ifdef ACCESS
	::	/* a fenced access with the latest lease's fence, at any time,
		 * also after the lease ended (a paused or delayed writer) */
		atomic {
			fen[c] ->
			printf("@ t=%d client %d: writes with lease %d, token %d\n", now, c, own[c], tok[c]);
			access(tok[c], own[c], fl[c], tok[c]);
			tidy()
		}
#endif
	od
}

proctype env() {
	byte i, j;
	do
	:: atomic { now < TMAX -> now++ }
	:: atomic {
		/* a lock expires */
		PICK(lockOwn[0] != 0 && MAY_EXPIRE(lockOwn[0]),
		     lockOwn[1] != 0 && MAY_EXPIRE(lockOwn[1]),
		     lockOwn[2] != 0 && MAY_EXPIRE(lockOwn[2]));
		printf("@ t=%d node %d: lock of attempt %d expired\n", now, i, lockOwn[i]);
		lockOwn[i] = 0; i = 0
	   }
#ifdef RESTART
	:: atomic {
		/* the faulty node restarts without persistence ... */
		!restarted ->
		restarted = true; crashAt = now;
		up[FAULTY] = false; lockOwn[FAULTY] = 0; ctr[FAULTY] = 0;
		printf("@ t=%d node %d: crashed, its data lost\n", now, FAULTY)
	   }
	:: atomic {
		/* ... and serves again, OUT or more later: time moves on
		 * to then, if it has not yet */
		restarted && !up[FAULTY] ->
		if
		:: now < crashAt + OUT -> now = crashAt + OUT
		:: else -> skip
		fi;
		up[FAULTY] = true; crashAt = 0;
		printf("@ t=%d node %d: back, empty\n", now, FAULTY)
	   }
#endif
	od
}

init {
	byte i;
	atomic {
#ifdef COUNTERS_AHEAD
		for (i : 0 .. N - 1) {
			if
			:: ctr[i] = AHEAD
			:: ctr[i] = AHEAD + 1
			fi
		}
		i = 0;
#endif
		run env();
		run client(0);
		run client(1)
	}
}
