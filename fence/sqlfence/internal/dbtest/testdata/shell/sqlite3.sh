#!/bin/sh
# Marks order 42 shipped, if the lease of `fencelock run` is still the
# newest to fence orders/42:  fencelock run orders:42 -- ./ship.sh
# -bail stops sqlite3 at the first error; BEGIN IMMEDIATE takes the write
# lock before the fence is read. The fence goes in hex, like any bytes.
fence=$(printf %s "$FENCELOCK_FENCE" | od -An -vtx1 | tr -d ' \n')
exec sqlite3 -bail shop.db <<SQL
BEGIN IMMEDIATE;
INSERT INTO fences_fence VALUES ('orders/42', X'$fence');
UPDATE orders SET state = 'shipped' WHERE id = 42;
COMMIT;
SQL
