#!/bin/sh
# Marks order 42 shipped, if the lease of `fencelock run` is still the
# newest to fence orders/42:  fencelock run orders:42 -- ./ship.sh
# psql connects as its environment says (PGHOST, PGDATABASE, ...); it
# quotes the fence itself (:'fence'), and stops at the first error.
exec psql -X -q -v ON_ERROR_STOP=1 -v fence="$FENCELOCK_FENCE" <<'SQL'
BEGIN;
SELECT fences_fence('orders/42', :'fence');
UPDATE orders SET state = 'shipped' WHERE id = 42;
COMMIT;
SQL
