package redistest

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy on a random 127.0.0.1 port in front of one
// upstream address. It injects network faults: partitions (bytes are held,
// not dropped, until Heal), latency, and connection resets.
type Proxy struct {
	upstream string
	ln       net.Listener

	mu      sync.Mutex
	open    chan struct{} // closed while forwarding is allowed
	latency time.Duration
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// NewProxy starts a proxy to upstream and closes it at cleanup.
func NewProxy(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: proxy listen: %v", err)
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{upstream: upstream, ln: ln, open: open, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	tb.Cleanup(p.Close)
	return p
}

// Addr returns the address clients should dial instead of upstream.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Partition stops forwarding in both directions. Connections stay open and
// bytes wait in the proxy, as on a network that silently drops packets
// until it heals.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default: // already partitioned
	}
}

// Heal resumes forwarding, delivering what was held.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// SetLatency delays every forwarded chunk by d, in both directions.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// Reset closes every live connection with a TCP RST.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
		delete(p.conns, c)
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Heal() // let held copies run into the closed connections and exit
	p.Reset()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			down.Close()
			continue
		}
		if !p.track(down, up) {
			down.Close()
			up.Close()
			return
		}
		p.wg.Go(func() { p.pipe(up, down) })
		p.wg.Go(func() { p.pipe(down, up) })
	}
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst chunk by chunk, honouring partitions and latency.
// Either side closing closes both.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer func() {
		src.Close()
		dst.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			open, latency := p.open, p.latency
			p.mu.Unlock()
			<-open
			if latency > 0 {
				time.Sleep(latency)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
