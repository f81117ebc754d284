/*
 * fence_rule.pml: the resource side alone (fence/fence.go Check, the Store
 * contract of fence/store.go as fence/memory.go implements it), against
 * any lock side: the leases' tokens are chosen freely, equal ones
 * included, as the lock side's documented unsafe cases can produce (a
 * token repeated after a clock stepped back further than the outage, or a
 * quorum node restarting empty mid-acquisition, see README.md). What the
 * rule promises must hold for every token sequence:
 *
 *   F1  the stored token never goes down;
 *   F2  once another lease has been accepted after lease L, L is never
 *       accepted again (one holder at a time, in token order; equal
 *       tokens from two leases do not interleave);
 *   F3  no access with another lock's fence is accepted;
 *   F4  a read-modify-write whose write is accepted lost no update: no
 *       other lease's write was accepted between its fenced read and it.
 *
 * Negative controls: TIE_NO_LEASE (equal token accepted from any lease),
 * CHECK_THEN_WRITE (the check and the write in two steps), READ_UNFENCED
 * (reads do not record the fence), NO_NAME_CHECK (lock names not
 * compared).
 */

#define NL	4	/* leases 1..3 of lock 1, lease 4 of lock 2 */

byte resLock, resTok, resLease;	/* the stored fence; resLock 0: none yet */
byte gone;		/* ghost, bit l: another lease was accepted after l */
byte reading;		/* ghost, bit l: l's read-modify-write has read */
byte clobbered;		/* ghost, bit l: another lease wrote since l read */
byte tokOf[NL + 1];

#define BIT(l)	(1 << (l))

#ifdef TIE_NO_LEASE
#define TIE(t, l)	((t) == resTok)
#else
#define TIE(t, l)	((t) == resTok && (l) == resLease)
#endif
#ifdef NO_NAME_CHECK
#define SAME_LOCK(n)	true
#else
#define SAME_LOCK(n)	((n) == resLock)
#endif
#define ACCEPT(n, t, l)	(resLock == 0 || (SAME_LOCK(n) && ((t) > resTok || TIE(t, l))))

/* record fence (n, t, l) as the stored one; inside atomic */
inline record(n, t, l) {
	printf("@ lease %d (lock %d, token %d): accepted\n", l, n, t);
	assert(resLock == 0 || n == resLock);		/* F3 */
	assert(resLock == 0 || t >= resTok);		/* F1 */
	assert((gone & BIT(l)) == 0);			/* F2 */
	if
	:: resLease != 0 && resLease != l -> gone = gone | BIT(resLease)
	:: else -> skip
	fi;
	resLock = n; resTok = t; resLease = l
}

/* a fenced write (Put or Delete) */
inline put(n, t, l) {
#ifdef CHECK_THEN_WRITE
	if
	:: atomic { ACCEPT(n, t, l) -> printf("@ lease %d: write checked\n", l) } ->
		/* the write, a separate step after the check */
		atomic {
			record(n, t, l);
			assert(!((reading & BIT(l)) && (clobbered & BIT(l))));	/* F4 */
			clobbered = clobbered | (reading & ~BIT(l));
			reading = reading & ~BIT(l)
		}
	:: atomic { !ACCEPT(n, t, l) -> reading = reading & ~BIT(l) }
	fi
#else
	atomic {
		if
		:: ACCEPT(n, t, l) ->
			record(n, t, l);
			assert(!((reading & BIT(l)) && (clobbered & BIT(l))));	/* F4 */
			clobbered = clobbered | (reading & ~BIT(l))
		:: !ACCEPT(n, t, l) ->	/* ErrStale: nothing changes */
			printf("@ lease %d (lock %d, token %d): rejected\n", l, n, t)
		fi;
		reading = reading & ~BIT(l)	/* a read-modify-write ends */
	}
#endif
}

/* a fenced read (Get), as the first half of a read-modify-write */
inline get(n, t, l) {
	atomic {
		if
		:: ACCEPT(n, t, l) ->
#ifndef READ_UNFENCED
			record(n, t, l);
#endif
			reading = reading | BIT(l);
			clobbered = clobbered & ~BIT(l);
			printf("@ lease %d (token %d): read for a read-modify-write\n", l, t)
		:: !ACCEPT(n, t, l) -> skip
		fi
	}
}

proctype lease(byte n, l) {
	do
	:: put(n, tokOf[l], l)
	:: get(n, tokOf[l], l)
	od
}

init {
	byte i;
	atomic {
		/* any tokens, repeats included */
		for (i : 1 .. NL) {
			if
			:: tokOf[i] = 1
			:: tokOf[i] = 2
			:: tokOf[i] = 3
			fi
		}
		run lease(1, 1);
		run lease(1, 2);
		run lease(1, 3);
		run lease(2, 4)
	}
}
