package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
)

// username returns the ACL user the target logs in to its data servers
// as: "default" if none is set.
func (t *redisTarget) username() string {
	u := ""
	switch {
	case t.failover != nil:
		u = t.failover.Username
	case t.cluster != nil:
		u = t.cluster.Username
	default:
		u = t.node.Username
	}
	if u == "" {
		return "default"
	}
	return u
}

// passwords returns the addresses that the target sends a password to,
// as configured: the node, the Cluster's seed nodes, the Sentinels; and
// whether the data servers get one (for a Sentinel group, the master
// found through them).
func (t *redisTarget) passwords() (addrs []string, data bool) {
	switch {
	case t.failover != nil:
		if t.failover.SentinelPassword != "" {
			addrs = t.failover.SentinelAddrs
		}
		return addrs, t.failover.Password != ""
	case t.cluster != nil:
		return nil, t.cluster.Password != ""
	}
	return nil, t.node.Password != ""
}

// serverAddr returns the address at which rdb's server received the
// connection (CLIENT INFO's laddr), else the address dialled.
func serverAddr(ctx context.Context, rdb *redis.Client) string {
	if info, err := rdb.Do(ctx, "CLIENT", "INFO").Text(); err == nil {
		for f := range strings.FieldsSeq(info) {
			if v, ok := strings.CutPrefix(f, "laddr="); ok && v != "" {
				return v
			}
		}
	}
	if rdb.Options().Network == "unix" {
		return "unix:" + rdb.Options().Addr
	}
	return rdb.Options().Addr
}

// exposed returns the addresses that are not on this host: neither a
// loopback address, nor localhost, nor a unix socket. A host name other
// than localhost counts as exposed: it may resolve anywhere.
func exposed(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		if strings.HasPrefix(a, "unix:") || strings.HasPrefix(a, "/") {
			continue
		}
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			host = a
		}
		if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
			continue
		}
		out = append(out, a)
	}
	return out
}

// checkTransport reports whether the connection is encrypted and the
// server's certificate verified, and warns when a password travels in
// clear text to another host.
func checkTransport(rep *doctorReport, t *redisTarget) {
	sentinelAddrs, dataPassword := t.passwords()
	unix := t.node != nil && t.node.Network == "unix"
	var remote []string
	if !unix {
		remote = exposed(rep.addrs)
	}
	switch {
	case unix:
		rep.add("tls", sevOK, "unix socket: nothing leaves this host", "")
	case t.seen == nil && len(remote) == 0:
		rep.add("tls", sevOK, "plain TCP, to loopback addresses only: nothing leaves this host", "")
	case t.seen == nil:
		rep.add("tls", sevWarn, "plain TCP to "+strings.Join(remote, ", ")+": commands, lock values and owner secrets travel unencrypted, and nothing proves the server is the one meant",
			"use TLS: a rediss:// URL or --tls, with --cacert for a private CA")
	default:
		cs, verified, ok := t.seen.handshake()
		switch {
		case !ok:
			rep.add("tls", sevInfo, "TLS configured, but no handshake was seen", "")
		case !verified:
			rep.add("tls", sevWarn, "TLS "+tlsVersion(cs)+", but the server's certificate is NOT verified (--insecure): encrypted, yet anyone on the network path can pose as the server",
				"give --cacert with the CA that issued the server's certificate, instead of --insecure")
		default:
			msg := "TLS " + tlsVersion(cs) + ", the server's certificate verified"
			if len(cs.PeerCertificates) > 0 {
				c := cs.PeerCertificates[0]
				msg += fmt.Sprintf(" (%s, issued by %s)", c.Subject, c.Issuer)
			}
			if certs := *t.tlsConfig(); certs != nil && len(certs.Certificates) > 0 {
				msg += "; client certificate presented"
			}
			rep.add("tls", sevOK, msg, "")
		}
	}
	if t.seen != nil {
		return
	}
	var clear []string
	if dataPassword {
		clear = append(clear, remote...)
	}
	clear = append(clear, exposed(sentinelAddrs)...)
	if len(clear) > 0 {
		rep.add("credentials", sevWarn, "the password goes in clear text to "+strings.Join(clear, ", ")+": anyone on the network path can read it and log in",
			"use TLS (rediss://, --tls) to any server that is not on this host")
	}
}

// tlsVersion words the handshake's protocol and cipher suite.
func tlsVersion(cs tls.ConnectionState) string {
	return tls.VersionName(cs.Version) + " (" + tls.CipherSuiteName(cs.CipherSuite) + ")"
}

// withHint returns err's text, with what it means if it is a TLS failure.
func withHint(err error) string {
	if hint := tlsHint(err); hint != "" {
		return err.Error() + " (" + hint + ")"
	}
	return err.Error()
}
