package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// host is what the figures depend on besides the code: the processor,
// whether it is virtual, and what a system call costs, which every
// request pays several times on both sides (a write and a read on the
// client, a read, a write and an epoll_wait on the server), so that a
// machine with page-table isolation (a kernel's Meltdown mitigation: each
// system call switches page tables) pays more per request than one
// without, for the same scripts.
type host struct {
	cpu        string        // /proc/cpuinfo "model name"
	hypervisor bool          // the "hypervisor" flag: a virtual machine
	pti        string        // page-table isolation: "on", "off", or "?"
	meltdown   string        // /sys/devices/system/cpu/vulnerabilities/meltdown
	getppid    time.Duration // one getppid(2), the bare cost of a system call
	write      time.Duration // one 1-byte write(2) to /dev/null through Go's syscall.Write
}

// hostInfo reads the processor and the kernel's mitigation state and
// times the two system calls: the least over a few rounds, so that other
// jobs on the machine show as little as possible.
func hostInfo() host {
	h := host{cpu: "?", pti: "?", meltdown: "?"}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
	lines:
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "model name":
				h.cpu = strings.TrimSpace(v)
			case "flags":
				flags := strings.Fields(v)
				h.hypervisor = slices.Contains(flags, "hypervisor")
				h.pti = "off"
				if slices.Contains(flags, "pti") {
					h.pti = "on"
				}
				break lines // the first processor's model and flags are enough
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/sys/devices/system/cpu/vulnerabilities/meltdown"); err == nil {
		h.meltdown = strings.TrimSpace(string(b))
	}
	h.getppid = leastPer(func() { syscall.Getppid() })
	if f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		fd, b := int(f.Fd()), []byte{0}
		h.write = leastPer(func() { syscall.Write(fd, b) })
		f.Close()
	}
	return h
}

// leastPer returns the least time per call of f over 5 rounds of 20,000
// calls: a few tens of milliseconds.
func leastPer(f func()) time.Duration {
	const n = 20000
	best := time.Duration(1 << 62)
	for range 5 {
		t0 := time.Now()
		for range n {
			f()
		}
		best = min(best, time.Since(t0)/n)
	}
	return best
}

func (h host) String() string {
	cpu := h.cpu
	if h.hypervisor {
		cpu += ", virtual machine"
	}
	return fmt.Sprintf("%s; a system call %s (getppid), a 1-byte write to /dev/null %s; page-table isolation %s (meltdown: %s)",
		cpu, nanos(h.getppid), nanos(h.write), h.pti, h.meltdown)
}

func nanos(d time.Duration) string { return fmt.Sprintf("%d ns", d.Nanoseconds()) }

// loadAverage returns the 1-minute load average (/proc/loadavg), or -1.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	x, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return x
}
