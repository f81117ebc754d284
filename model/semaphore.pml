/*
 * semaphore.pml: a counting semaphore of SLOTS permits on one standalone
 * server, three clients, a fenced resource per permit slot. README.md maps
 * each part to the code it abstracts. Each slot is a lock of single.pml
 * (its own lock key and token counter, prefix{name}:permit:i and
 * prefix{name}:permit:i:token); the acquisition is one script that takes
 * any free slot with lua/acquire.lua's rule. The server's clock steps back
 * and forth within DMAX of true time; it may crash and restart without
 * persistence, at least OUT later.
 *
 *   P1  per slot, tokens strictly increase (so no two leases of a slot
 *       share a token)
 *   P3  per slot, no stale write: the slot's resource never accepts a
 *       lease issued before one it already accepted
 *   P6  never more than SLOTS leases valid (local deadline not passed) at
 *       once, unless a crash broke exclusion (as P5 of single.pml)
 *
 * Negative control: FIND_THEN_TAKE, a free slot found by one request and
 * taken by a later one without NX (the count-then-add race of a
 * client-side semaphore). PROBE_FULL: every slot validly held while
 * another client's acquisition finds none free.
 */

#ifndef TMAX
#define TMAX	6
#endif
#ifndef LEASES
#define LEASES	4
#endif
#define SLOTS	2
#define CLIENTS	3
#define TTL	4
#define DRIFT	1
#define RET	5
#define OUT	2
#define DMAX	1
#ifndef MAXCRASH
#define MAXCRASH 1
#endif

/* P3 per slot, in issue order, as single.pml's */
byte rix;		/* the slot an access goes to; 0 between steps */
#define RES_DIM	[SLOTS]
#define RES_AT	[rix]
#define STALE_OK(b, d)	((d) >= resLease[rix])
#include "fence.pml"

byte now;
bool up = true;
byte downUntil, crashes;
bool issued;		/* the server ran an acquisition in this time unit */
byte off;		/* clock reading = now + off, 0 <= off <= DMAX */
#define READING	(now + off)

/* per slot: lock key, token counter */
byte lockOwn[SLOTS], lockExp[SLOTS], ctrVal[SLOTS], ctrExp[SLOTS];
byte maxIss[SLOTS];	/* ghost: greatest token issued per slot */

/* per client: its permit, kept after it ended for delayed accesses */
bool hold[CLIENTS];
byte tok[CLIENTS], own[CLIENTS], slot[CLIENTS];
byte dl[CLIENTS];	/* local deadline; 0 once passed */
#ifdef FIND_THEN_TAKE
byte found[CLIENTS];	/* slot + 1 the first request found free */
#endif

byte nDone;		/* ghost: leases issued */
bool probe;
#define PROBE(cond)	assert(probe || !(cond))
#define VALID(i)	(hold[i] && now < dl[i] -> 1 : 0)
#define NVALID		(VALID(0) + VALID(1) + VALID(2))
#define FREE(i)		(lockOwn[i] == 0)

inline purge() {
	byte k;
	for (k : 0 .. SLOTS - 1) {
		if
		:: lockOwn[k] != 0 && lockExp[k] <= READING ->
			printf("@ t=%d slot %d (clock %d): lock of lease %d expired\n", now, k, READING, lockOwn[k]);
			lockOwn[k] = 0; lockExp[k] = 0
		:: else -> skip
		fi;
		if
		:: ctrVal[k] != 0 && ctrExp[k] <= READING ->
			printf("@ t=%d slot %d (clock %d): token counter (%d) expired\n", now, k, READING, ctrVal[k]);
			ctrVal[k] = 0; ctrExp[k] = 0
		:: else -> skip
		fi
	}
	k = 0
}

/* lua/acquire.lua's rule on slot s, then this client holds it; inside
 * atomic. With FIND_THEN_TAKE the lock is set whoever holds it. */
inline take(c, s, t) {
	t = ctrVal[s] + 1;
	if
	:: READING > t -> t = READING
	:: else -> skip
	fi;
	printf("@ t=%d client %d: takes slot %d (clock %d, counter %d): token %d\n", now, c, s, READING, ctrVal[s], t);
	assert(t > maxIss[s]);	/* P1: per slot, tokens strictly increase */
	maxIss[s] = t;
	nValid = NVALID;
	assert(crashes > 0 || nValid < SLOTS);	/* P6: never more than SLOTS valid */
	nValid = 0;
	nDone++;
	lockOwn[s] = nDone; lockExp[s] = READING + TTL;
	ctrVal[s] = t; ctrExp[s] = READING + RET;
	issued = true;
	tok[c] = t; own[c] = nDone; slot[c] = s; hold[c] = true;
	dl[c] = now + TTL - DRIFT;
	printf("@ t=%d client %d: holds lease %d on slot %d, token %d\n", now, c, nDone, s, t);
	t = 0
}

byte nValid;		/* scratch for P6; 0 between steps */

proctype client(byte c) {
	byte t;
	do
#ifndef FIND_THEN_TAKE
	::	/* the semaphore's acquire script: any free slot, acquire.lua's
		 * rule on it, one atomic step */
		atomic {
			!hold[c] && nDone < LEASES && up && !issued && (FREE(0) || FREE(1)) ->
			if
			:: FREE(0) -> take(c, 0, t)
			:: FREE(1) -> take(c, 1, t)
			fi
		}
#ifdef PROBE_FULL
	::	atomic {
			!hold[c] && up && !FREE(0) && !FREE(1) ->
			PROBE(NVALID == SLOTS)
		}
#endif
#else
	::	/* negative control: one request finds a free slot ... */
		atomic {
			!hold[c] && found[c] == 0 && nDone < LEASES && up && (FREE(0) || FREE(1)) ->
			if
			:: FREE(0) -> found[c] = 1
			:: FREE(1) -> found[c] = 2
			fi
		}
	::	/* ... a later one takes it, without NX */
		atomic {
			found[c] != 0 && nDone < LEASES && up && !issued ->
			take(c, found[c] - 1, t);
			found[c] = 0
		}
#endif
	::	/* lua/renew.lua on the permit's slot: owner-checked, keeps the
		 * counter; the deadline moves only while the lease is not lost */
		atomic {
			hold[c] && up && lockOwn[slot[c]] == own[c] ->
			lockExp[slot[c]] = READING + TTL;
			if
			:: ctrVal[slot[c]] < tok[c] -> ctrVal[slot[c]] = tok[c]
			:: else -> skip
			fi;
			ctrExp[slot[c]] = READING + RET;
			if
			:: now < dl[c] -> dl[c] = now + TTL - DRIFT
			:: else -> skip
			fi;
			printf("@ t=%d client %d: renewed lease %d on slot %d\n", now, c, own[c], slot[c])
		}
	::	/* lua/release.lua on the permit's slot: compare-and-delete */
		atomic {
			hold[c] ->
			if
			:: up && lockOwn[slot[c]] == own[c] ->
				lockOwn[slot[c]] = 0; lockExp[slot[c]] = 0
			:: else -> skip
			fi;
			hold[c] = false; dl[c] = 0;
			printf("@ t=%d client %d: released lease %d\n", now, c, own[c])
		}
	::	/* a fenced access to the slot's resource with the permit's fence,
		 * at any time: a paused holder, a delayed request */
		atomic {
			own[c] != 0 ->
			rix = slot[c];
			printf("@ t=%d client %d: writes slot %d with lease %d, token %d\n", now, c, rix, own[c], tok[c]);
			access(tok[c], own[c], 0, own[c]);
			rix = 0
		}
	od
}

proctype env() {
	byte i;
	do
	:: atomic {
		now < TMAX -> now++; issued = false;
		for (i : 0 .. CLIENTS - 1) {
			if
			:: dl[i] != 0 && dl[i] <= now -> dl[i] = 0	/* lost */
			:: else -> skip
			fi
		}
		i = 0;
		purge()
	   }
	:: atomic {
		off < DMAX -> off++;
		printf("@ t=%d server: clock stepped forward to %d\n", now, READING);
		purge()
	   }
	:: atomic {
		off > 0 -> off--;
		printf("@ t=%d server: clock stepped back to %d\n", now, READING)
	   }
	:: atomic {
		crashes < MAXCRASH && up ->
		up = false; crashes++; downUntil = now + OUT;
		for (i : 0 .. SLOTS - 1) {
			lockOwn[i] = 0; lockExp[i] = 0; ctrVal[i] = 0; ctrExp[i] = 0
		}
		i = 0;
		printf("@ t=%d server: crashed, its data lost\n", now)
	   }
	:: atomic {
		!up && now >= downUntil -> up = true; downUntil = 0;
		printf("@ t=%d server: restarted empty (clock %d)\n", now, READING)
	   }
	od
}

init {
	atomic {
		run env();
		run client(0);
		run client(1);
		run client(2)
	}
}
