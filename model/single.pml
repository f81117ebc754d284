/*
 * single.pml: one lock on one Redis deployment, two clients, one fenced
 * resource. README.md maps each part to the Go and Lua code it abstracts
 * and explains the bounds. Exactly one of these is defined (model/run):
 *
 *   STANDALONE  one server; its clock steps back and forth within DMAX of
 *               true time; it may crash and restart without persistence,
 *               at least OUT later.
 *   SENTINEL    a master with an asynchronously replicated replica; the
 *               master may crash, and the replica is promoted with
 *               whatever it has, at least OUT later. Clock offsets are
 *               fixed per server, anywhere within DMAX.
 *   STEADY      one server, no crash; its clock starts up to RET + 1 ahead
 *               and is set back at any moment; the lock is in steady use
 *               (never RET on the server's clock without an acquisition
 *               or renewal). This is the promise "tokens still increase
 *               while the counter is kept", whatever the clock does.
 *
 * Negative controls: NO_CLOCK_FLOOR, NO_RENEW_RETENTION, NO_OWNER_CHECK,
 * BIG_STEP, NO_DRIFT, and TIE_NO_LEASE in fence.pml. NO_P1 leaves the
 * token assertion out, so that a control's search goes on to what the
 * resource then accepts (P3).
 */

#ifndef TMAX
#define TMAX	9	/* time horizon, in clock units */
#endif
#ifndef LEASES
#define LEASES	4	/* leases issued in one history, all clients together */
#endif
#define TTL	4	/* lock TTL (PX) */
#ifdef NO_DRIFT
#define DRIFT	0	/* negative control: no allowance for the clock */
#else
#define DRIFT	1	/* lease.go: deadline = start + TTL - drift */
#endif
#define RET	5	/* TokenRetention (>= TTL, as options.go requires) */
#define OUT	2	/* the shortest outage: a crashed master is back
			   (restart) or replaced (failover) no sooner */

#ifdef STEADY
#define MAXCRASH 0
#define DMAX	(RET + 1)	/* a clock error above the retention: where
				   a renew without the counter lets
				   tokens go back */
#else
#define MAXCRASH 1
#ifdef BIG_STEP
#define DMAX	OUT	/* a clock error as large as the outage: outside
			   the assumption DMAX < OUT */
#else
#define DMAX	1
#endif
#endif

/* P3 in issue order: never accept a lease issued before one already
 * accepted. Accepted leases are then in issue order, so the last one
 * accepted stands for all of them. */
#define STALE_OK(b, d)	((d) >= resLease)
#include "fence.pml"

byte now;		/* true time */
byte master;		/* index of the master: 0, or 1 after a failover */
#ifdef SENTINEL
bool hasReplica = true;
#else
bool hasReplica = false;
#endif
bool up[2];
byte downUntil;		/* while the master is down: when it may be back */
byte crashes;
bool issued;		/* the master ran an acquisition in this time unit */

/* per server: the lock key, the token counter, the clock offset */
byte lockOwn[2];	/* owner value (here: the lease ID), 0 = absent */
byte lockExp[2];	/* absolute expiry, on that server's clock */
byte ctrVal[2];		/* token counter, 0 = absent */
byte ctrExp[2];
byte off[2];		/* clock reading = now + off, 0 <= off <= DMAX */

/* per client: its lease, kept after release for delayed accesses */
bool hold[2];
byte tok[2];
byte own[2];		/* owner value = lease ID = issue order */
byte dl[2];		/* local deadline; 0 once it has passed */

/* ghosts */
byte maxIss;		/* greatest token issued so far */
byte nDone;		/* leases issued so far */
#ifdef STEADY
byte useExp;		/* reading at the last acquisition or renewal + RET */
#define STEADY_OK	(useExp == 0 || READING(0) + 1 < useExp)
#else
#define STEADY_OK	true
#endif

#define READING(s)	(now + off[s])
#define M		master

/* Reachability probes (model/run): each asserts that a situation the
 * configuration exists for never happens, so Spin must find it; a probe
 * that holds would mean the model checks less than it claims. */
bool probe;
#define PROBE(cond)	assert(probe || !(cond))

inline purge(s) {
	/* An expired key is gone as soon as its server's clock reaches the
	 * expiry: Redis's lazy and active expiry, taken at its earliest. */
	if
	:: lockOwn[s] != 0 && lockExp[s] <= READING(s) ->
		printf("@ t=%d server %d (clock %d): lock of lease %d expired\n", now, s, READING(s), lockOwn[s]);
		lockOwn[s] = 0; lockExp[s] = 0
	:: else -> skip
	fi;
	if
	:: ctrVal[s] != 0 && ctrExp[s] <= READING(s) ->
		printf("@ t=%d server %d (clock %d): token counter (%d) expired\n", now, s, READING(s), ctrVal[s]);
		ctrVal[s] = 0; ctrExp[s] = 0
	:: else -> skip
	fi
}

inline wipe(s) {
	lockOwn[s] = 0; lockExp[s] = 0; ctrVal[s] = 0; ctrExp[s] = 0
}

/* P5 (STANDALONE): while a lease's local deadline has not passed, no
 * other lease can be acquired, unless a crash broke exclusion. Not with
 * BIG_STEP: a clock that jumps ahead by more than DRIFT expires the lock
 * early, which FAILURE_MODEL.md lists as breaking exclusion. */
inline deadlineHolds(c) {
#if defined(STANDALONE) && !defined(BIG_STEP)
	if
	:: crashes == 0 ->
		assert(c == 0 || !(hold[0] && now < dl[0]));
		assert(c == 1 || !(hold[1] && now < dl[1]))
	:: else -> skip
	fi
#else
	skip
#endif
}

proctype client(byte c) {
	byte t;
	do
	::	/* client.go try + lua/acquire.lua, on whichever server is master.
		 * The request's latency is taken as zero: the tightest case for
		 * the deadline, measured from before the request. */
		atomic {
			!hold[c] && nDone < LEASES && up[M] && lockOwn[M] == 0 && !issued ->
			/* SET NX PX, then token = max(stored + 1, TIME in µs) */
			t = ctrVal[M] + 1;
#ifndef NO_CLOCK_FLOOR
			if
			:: READING(M) > t -> t = READING(M)
			:: else -> skip
			fi;
#endif
			printf("@ t=%d client %d: acquires on server %d (clock %d, counter %d): token %d\n", now, c, M, READING(M), ctrVal[M], t);
#ifndef NO_P1
			assert(t > maxIss);	/* P1, P2: tokens strictly increase */
#endif
			if
			:: t > maxIss -> maxIss = t
			:: else -> skip
			fi;
#ifdef PROBE_RESTART_FLOOR	/* a token from the clock floor after a restart */
			PROBE(crashes > 0 && ctrVal[M] == 0 && maxIss > 0);
#endif
#ifdef PROBE_RETENTION	/* a token after the counter expired */
			PROBE(crashes == 0 && ctrVal[M] == 0 && maxIss > 0);
#endif
#ifdef PROBE_LAGGING	/* on a promoted replica whose counter lags */
			PROBE(master == 1 && ctrVal[M] < maxIss && t > READING(M) - 1);
#endif
#ifdef PROBE_AHEAD	/* the counter ahead of a stepped-back clock by RET - 1 */
			PROBE(ctrVal[M] >= READING(M) + RET - 1);
#endif
			deadlineHolds(c);
			nDone++;
			lockOwn[M] = nDone; lockExp[M] = READING(M) + TTL;
			ctrVal[M] = t; ctrExp[M] = READING(M) + RET;
			issued = true;
#ifdef STEADY
			useExp = READING(M) + RET;
#endif
			printf("@ t=%d client %d: holds lease %d, token %d\n", now, c, nDone, t);
			tok[c] = t; own[c] = nDone; hold[c] = true;
#ifdef STANDALONE
			dl[c] = now + TTL - DRIFT;
#endif
			t = 0
		}
	::	/* lua/renew.lua / SET k v IFEQ v PX ttl: owner-checked, never
		 * re-creates the lock. Fixed, it also keeps the counter:
		 * max(stored, token), retention counted from now. The deadline
		 * moves only while the lease is not lost (lease.go renew); a
		 * renewal that lands after the deadline still extends the lock. */
		atomic {
			hold[c] && up[M] && lockOwn[M] == own[c] ->
			printf("@ t=%d client %d: renewed lease %d (clock %d)\n", now, c, own[c], READING(M));
			lockExp[M] = READING(M) + TTL;
#ifndef NO_RENEW_RETENTION
			if
			:: ctrVal[M] < tok[c] -> ctrVal[M] = tok[c]
			:: else -> skip
			fi;
			ctrExp[M] = READING(M) + RET;
#endif
#ifdef STEADY
			useExp = READING(M) + RET;
#endif
#ifdef STANDALONE
			if
			:: now < dl[c] -> dl[c] = now + TTL - DRIFT
			:: else -> skip
			fi
#else
			skip
#endif
		}
	::	/* lua/release.lua / DELEX IFEQ / DELIFEQ: compare-and-delete. A
		 * release that finds another owner's lock, none, or no master
		 * changes nothing; the lease ends either way. */
		atomic {
			hold[c] ->
			if
#ifdef NO_OWNER_CHECK
			:: up[M] && lockOwn[M] != 0 ->
#else
			:: up[M] && lockOwn[M] == own[c] ->
#endif
				assert(lockOwn[M] == own[c]);	/* P4: released by its owner only */
				lockOwn[M] = 0; lockExp[M] = 0;
				printf("@ t=%d client %d: released lease %d\n", now, c, own[c])
			:: else -> printf("@ t=%d client %d: lease %d ends, its lock was gone\n", now, c, own[c])
			fi;
			hold[c] = false; dl[c] = 0
		}
	::	/* a fenced access with this client's latest fence, at any time:
		 * a paused holder acting on its stale belief, or a request
		 * delayed in the network past the lease's end */
		atomic {
			own[c] != 0 ->
			printf("@ t=%d client %d: writes with lease %d, token %d\n", now, c, own[c], tok[c]);
			access(tok[c], own[c], 0, own[c])
		}
	od
}

proctype env() {
	do
	:: atomic {
		now < TMAX && STEADY_OK ->
		now++; issued = false;
		if
		:: dl[0] != 0 && dl[0] <= now -> dl[0] = 0	/* lost at the deadline */
		:: else -> skip
		fi;
		if
		:: dl[1] != 0 && dl[1] <= now -> dl[1] = 0
		:: else -> skip
		fi;
		purge(M)
	   }
#ifdef STANDALONE
	:: atomic {
		/* the clock steps forward or back, within [0, DMAX] of true
		 * time (NTP stepping, a VM restored, an operator) */
		off[0] < DMAX -> off[0]++;
		printf("@ t=%d server 0: clock stepped forward to %d\n", now, READING(0));
		purge(0)
	   }
#endif
#ifndef SENTINEL
	/* STEADY: the clock starts up to DMAX ahead and is set back, by
	 * any amount, at any moment */
	:: atomic {
		off[0] > 0 -> off[0]--;
		printf("@ t=%d server 0: clock stepped back to %d\n", now, READING(0))
	   }
#endif
#ifdef STANDALONE
	:: atomic {
		/* the server crashes, losing its memory ... */
		crashes < MAXCRASH && up[0] ->
		up[0] = false; crashes++; downUntil = now + OUT; wipe(0);
		printf("@ t=%d server 0: crashed, its data lost\n", now)
	   }
	:: atomic {
		/* ... and restarts without persistence, empty */
		!up[0] && now >= downUntil -> up[0] = true; downUntil = 0;
		printf("@ t=%d server 0: restarted empty (clock %d)\n", now, READING(0))
	   }
#endif
#ifdef SENTINEL
	:: atomic {
		/* asynchronous replication: the replica catches up with the
		 * master as it is now, so it always holds some past state of the
		 * master's data, as a replication stream does; expiry times
		 * travel as absolute times (Redis 7 propagates PXAT) */
		hasReplica && up[M] ->
		lockOwn[1] = lockOwn[0]; lockExp[1] = lockExp[0];
		ctrVal[1] = ctrVal[0]; ctrExp[1] = ctrExp[0];
		printf("@ t=%d replica: caught up (lock of lease %d, counter %d)\n", now, lockOwn[1], ctrVal[1])
	   }
	:: atomic {
		/* the master crashes ... */
		crashes < MAXCRASH && up[0] ->
		up[0] = false; crashes++; downUntil = now + OUT; wipe(0);
		printf("@ t=%d master: crashed\n", now)
	   }
	:: atomic {
		/* ... and Sentinel promotes the replica with whatever it has,
		 * its clock anywhere within DMAX; the old master stays out */
		!up[0] && hasReplica && now >= downUntil ->
		master = 1; up[1] = true; hasReplica = false; downUntil = 0;
		if
		:: off[1] = 0
		:: off[1] = DMAX
		fi;
		printf("@ t=%d replica promoted (clock %d, lock of lease %d, counter %d)\n", now, READING(1), lockOwn[1], ctrVal[1]);
		purge(1)
	   }
#endif
	od
}

init {
	atomic {
		up[0] = true;
#ifdef STEADY
		do
		:: off[0] < DMAX -> off[0]++
		:: break
		od;
#endif
#ifdef SENTINEL
		if
		:: off[0] = 0
		:: off[0] = DMAX
		fi;
#endif
		run env();
		run client(0);
		run client(1)
	}
}
