#!/bin/sh
# Marks order 42 shipped, if the lease of `fencelock run` is still the
# newest to fence orders/42:  fencelock run orders:42 -- ./ship.sh
# mysql connects as its option files say (~/.my.cnf), and stops at the
# first error. The fence goes in hex, since mysql reads backslashes in
# quoted strings and a fence may hold some.
fence=$(printf %s "$FENCELOCK_FENCE" | od -An -vtx1 | tr -d ' \n')
exec mysql <<SQL
BEGIN;
CALL fences_fence('orders/42', X'$fence');
UPDATE orders SET state = 'shipped' WHERE id = 42;
COMMIT;
SQL
