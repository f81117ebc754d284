package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fencelock/fencelock"
	"github.com/redis/go-redis/v9"
)

// aclProbe returns a command that needs perm, one of the permissions of
// fencelock.ACLRule, on key and channel (under the prefix); nil for key
// and channel patterns, which the probes of the commands that take keys
// and channels check. ACL DRYRUN checks a command without running it.
func aclProbe(perm, key, channel string) []any {
	switch perm {
	case "+evalsha":
		return []any{"EVALSHA", strings.Repeat("0", 40), 2, key, key + ":token"}
	case "+eval":
		return []any{"EVAL", "return 1", 2, key, key + ":token"}
	case "+get":
		return []any{"GET", key}
	case "+set":
		return []any{"SET", key, "owner", "PX", 1000}
	case "+pttl":
		return []any{"PTTL", key}
	case "+time":
		return []any{"TIME"}
	case "+pexpire":
		return []any{"PEXPIRE", key, 1000}
	case "+del":
		return []any{"DEL", key}
	case "+delex":
		return []any{"DELEX", key, "IFEQ", "owner"}
	case "+delifeq":
		return []any{"DELIFEQ", key, "owner"}
	case "+publish":
		return []any{"PUBLISH", channel, ""}
	case "+subscribe":
		return []any{"SUBSCRIBE", channel}
	case "+unsubscribe":
		return []any{"UNSUBSCRIBE", channel}
	case "+spublish":
		return []any{"SPUBLISH", channel, ""}
	case "+ssubscribe":
		return []any{"SSUBSCRIBE", channel}
	case "+ping":
		return []any{"PING"}
	case "+client|tracking":
		return []any{"CLIENT", "TRACKING", "ON"}
	case "+command|info":
		return []any{"COMMAND", "INFO", "GET"}
	case "+command":
		return []any{"COMMAND"}
	case "+cluster|slots":
		return []any{"CLUSTER", "SLOTS"}
	case "+wait":
		return []any{"WAIT", 0, 0}
	case "+cluster|shards":
		return []any{"CLUSTER", "SHARDS"}
	case "+role":
		return []any{"ROLE"}
	case "+discard":
		return []any{"DISCARD"}
	case "+punsubscribe":
		return []any{"PUNSUBSCRIBE"}
	case "+sunsubscribe":
		return []any{"SUNSUBSCRIBE"}
	}
	return nil
}

// aclExcess are commands that no lock needs and that do harm in the
// wrong hands: a user that may run them has far more than fencelock
// needs.
var aclExcess = [][]any{
	{"FLUSHALL"},
	{"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"},
	{"KEYS", "*"},
	{"ACL", "SETUSER", "someone"},
	{"SHUTDOWN"},
}

// checkACL checks with ACL DRYRUN, on the server rdb is connected to,
// that user may send every command the library sends there (the rule of
// fencelock.ACLRule for opts), and warns when user may do far more.
func checkACL(ctx context.Context, rdb *redis.Client, rep *doctorReport, user string, opts fencelock.ACLOptions) {
	rule := fencelock.ACLRule(&opts)
	fields := strings.Fields(rule)
	keys, channels := fields[0], fields[1] // ~PREFIX* &PREFIX*
	key := opts.Prefix + "{doctor-acl-probe}"
	channel := key + ":released"
	dryrun := func(args []any) (string, error) {
		return rdb.Do(ctx, append([]any{"ACL", "DRYRUN", user}, args...)...).Text()
	}

	var missing, checked []string
	keyOK, channelOK := false, false
	for _, perm := range strings.Fields(rule) {
		args := aclProbe(perm, key, channel)
		if args == nil {
			continue
		}
		reply, err := dryrun(args)
		if err != nil {
			aclUnchecked(rep, user, rule, err)
			return
		}
		checked = append(checked, perm)
		switch {
		case reply == "OK":
			keyOK = keyOK || slices.Contains(args, any(key))
			channelOK = channelOK || slices.Contains(args, any(channel))
		case strings.HasSuffix(reply, " key"):
			missing = appendNew(missing, keys)
		case strings.HasSuffix(reply, " channel"):
			missing = appendNew(missing, channels)
		default:
			missing = appendNew(missing, perm)
		}
	}
	// A pattern that no allowed command could confirm is granted again:
	// harmless if the user has it.
	if !keyOK {
		missing = appendNew(missing, keys)
	}
	if !channelOK {
		missing = appendNew(missing, channels)
	}
	whole := fmt.Sprintf("or from scratch: ACL SETUSER %s reset on >PASSWORD %s", user, rule)
	if len(missing) > 0 {
		rep.add("acl", sevCritical, fmt.Sprintf("ACL user %s may not send all that fencelock sends to this server: it lacks %s (by ACL DRYRUN)", user, strings.Join(missing, " ")),
			fmt.Sprintf("ACL SETUSER %s %s, on every server, replicas included (%s)", user, strings.Join(missing, " "), whole))
	} else {
		rep.add("acl", sevOK, fmt.Sprintf("ACL user %s may send all that fencelock sends to this server (by ACL DRYRUN: %s)", user, strings.Join(checked, " ")), "")
	}

	// Far more than needed: commands no lock sends, keys and channels
	// outside the prefix.
	var more []string
	for _, args := range aclExcess {
		if reply, err := dryrun(args); err == nil && reply == "OK" {
			more = append(more, fmt.Sprint(args[0]))
			if len(args) > 1 && args[0] != "KEYS" {
				more[len(more)-1] += " " + fmt.Sprint(args[1])
			}
		}
	}
	outside := "fencelock-doctor-outside"
	if strings.HasPrefix(outside, opts.Prefix) {
		outside = "zz-" + outside
	}
	if reply, err := dryrun([]any{"GET", outside}); err == nil && reply == "OK" {
		more = append(more, "keys outside "+opts.Prefix+"* (as with ~* or allkeys)")
	}
	publish := "PUBLISH"
	if opts.Cluster {
		publish = "SPUBLISH"
	}
	if reply, err := dryrun([]any{publish, outside, ""}); err == nil && reply == "OK" {
		more = append(more, "channels outside "+opts.Prefix+"* (as with &* or allchannels)")
	}
	if len(more) > 0 {
		rep.add("privileges", sevWarn, fmt.Sprintf("ACL user %s may do far more than fencelock needs: %s", user, strings.Join(more, ", ")),
			fmt.Sprintf("give the locks an ACL user of their own, with only: ACL SETUSER NAME reset on >PASSWORD %s", rule))
	}
}

// aclUnchecked reports why ACL DRYRUN could not check user.
func aclUnchecked(rep *doctorReport, user, rule string, err error) {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "User '") && strings.Contains(msg, "not found"):
		rep.add("acl", sevCritical, fmt.Sprintf("ACL user %s does not exist on this server", user),
			fmt.Sprintf("create it on every server, replicas included: ACL SETUSER %s reset on >PASSWORD %s", user, rule))
	case redis.HasErrorPrefix(err, "NOPERM"):
		rep.add("acl", sevInfo, "permissions not checked: the user doctor connects as may not run ACL DRYRUN (a least-privilege user may not); the test lock below still tries them",
			"to check them all, run doctor as an administrator, with --acl-user "+user)
	case strings.Contains(strings.ToLower(msg), "unknown subcommand"):
		rep.add("acl", sevInfo, "permissions not checked: ACL DRYRUN needs Redis >= 7.0 or Valkey; the test lock below still tries them", "")
	default:
		rep.add("acl", sevInfo, "permissions not checked: ACL DRYRUN failed: "+msg, "")
	}
}

// appendNew appends s to list unless it is there.
func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
