/*
 * fence.pml: the resource side, shared by the lock-side configurations.
 *
 * Abstracts fence/fence.go Check and the Store contract (fence/store.go,
 * fence/memory.go access): an access carrying fence (lock, token, lease)
 * is accepted iff, atomically with the access,
 *   - nothing is stored yet, or
 *   - lock == stored lock, and
 *   - token > stored token, or token == stored token and lease == stored
 *     lease;
 * and the stored fence then becomes the access's fence. Fenced reads
 * (Store.Get) record the fence exactly as writes do, so the lock-side
 * configurations model one kind of fenced access; fence_rule.pml checks
 * the rule itself, reads, writes and lock names apart, against any token.
 *
 * The including file defines STALE_OK(b, d), the "no stale write"
 * property (P3) for an access by a lease with ghost sequence numbers b
 * (leases completed before it began) and d (its place in the completion
 * order): lease L is older than M when L completed before M began,
 * d_L <= b_M. With KEEP_MAXB, resMaxB keeps the greatest b accepted.
 *
 * With KEEP_GONE, also P3b: once another lease has been accepted after
 * lease L, L is never accepted again (two leases that share a token do
 * not interleave). gone has bit l set for such leases.
 */

/* One resource, or with RES_DIM ([n]) n of them, the access going to
 * resource RES_AT ([i], i a global the caller sets): semaphore.pml's
 * resource per permit slot. Empty by default, so the lock-side files read
 * as one resource. */
#ifndef RES_DIM
#define RES_DIM
#define RES_AT
#endif
byte resTok RES_DIM;	/* stored fence: token (0: nothing stored yet) */
byte resLease RES_DIM;	/* stored fence: lease ID */
#ifdef KEEP_MAXB
byte resMaxB;	/* ghost */
#endif
#ifdef KEEP_GONE
byte gone;	/* ghost */
#endif

#ifdef TIE_NO_LEASE
#define TIE(t, l)	((t) == resTok RES_AT)
#else
#define TIE(t, l)	((t) == resTok RES_AT && (l) == resLease RES_AT)
#endif

/* One lock name in the lock-side configurations: the name check is
 * always true there and is checked in fence_rule.pml. */
#define FENCE_OK(t, l)	(resTok RES_AT == 0 || (t) > resTok RES_AT || TIE(t, l))

/* One fenced access (Put, Get or Delete) by lease l with token t and
 * ghost sequence numbers b and d; call inside atomic. */
inline access(t, l, b, d) {
	if
	:: FENCE_OK(t, l) ->
		printf("@     resource: accepts token %d of lease %d\n", t, l);
		assert(STALE_OK(b, d));	/* P3: no stale write is accepted */
#ifdef KEEP_GONE
		assert((gone & (1 << l)) == 0);	/* P3b: no interleaving */
		if
		:: resLease RES_AT != 0 && resLease RES_AT != l -> gone = gone | (1 << resLease RES_AT)
		:: else -> skip
		fi;
#endif
		resTok RES_AT = t; resLease RES_AT = l;
#ifdef KEEP_MAXB
		if
		:: b > resMaxB -> resMaxB = b
		:: else -> skip
		fi
#endif
	:: else ->	/* ErrStale: nothing changes */
		printf("@     resource: rejects token %d of lease %d (has token %d of lease %d)\n", t, l, resTok RES_AT, resLease RES_AT)
	fi
}
