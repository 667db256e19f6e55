package farmbench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// ErrNotRoot: the shaped link needs root (network namespaces and tc).
var ErrNotRoot = errors.New("farmbench: needs root for a network namespace and tc")

// Link is a veth pair between the host's namespace and a namespace of
// its own, the host side's egress shaped by tc tbf.
type Link struct {
	NS       string // namespace name
	HostDev  string // host side
	NSDev    string // namespace side
	HostAddr string // IPv4 of the host side
	NSAddr   string // IPv4 of the namespace side
	Rate     string // tc rate, e.g. "500mbit"
	Burst    int    // tbf bucket, bytes
}

// run runs a command, returning its combined output in the error.
func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// NewLink creates the namespace and the veth pair named after tag (a few
// letters and digits), addresses them in 10.213.x.0/30 (x from tag's
// hash) and brings them up. Close removes them.
func NewLink(tag, rate string, burst int) (*Link, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	h := 0
	for _, c := range tag {
		h = h*31 + int(c)
	}
	x := h&0x7f + 1
	l := &Link{NS: "sluice-fb-" + tag, HostDev: "sfb" + tag + "h", NSDev: "sfb" + tag + "n",
		HostAddr: fmt.Sprintf("10.213.%d.1", x), NSAddr: fmt.Sprintf("10.213.%d.2", x), Rate: rate, Burst: burst}
	if len(l.HostDev) > 15 {
		return nil, fmt.Errorf("farmbench: tag %q makes interface names longer than 15 bytes", tag)
	}
	l.Close() // what a killed earlier run left
	steps := [][]string{
		{"ip", "netns", "add", l.NS},
		{"ip", "link", "add", l.HostDev, "type", "veth", "peer", "name", l.NSDev},
		{"ip", "link", "set", l.NSDev, "netns", l.NS},
		{"ip", "addr", "add", l.HostAddr + "/30", "dev", l.HostDev},
		{"ip", "link", "set", l.HostDev, "up"},
		{"ip", "netns", "exec", l.NS, "ip", "addr", "add", l.NSAddr + "/30", "dev", l.NSDev},
		{"ip", "netns", "exec", l.NS, "ip", "link", "set", l.NSDev, "up"},
		{"ip", "netns", "exec", l.NS, "ip", "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if _, err := run(s[0], s[1:]...); err != nil {
			l.Close()
			return nil, fmt.Errorf("farmbench: setting up the link: %w", err)
		}
	}
	return l, nil
}

// SetQueue (re)places the host side's qdisc: tbf at the link's rate and
// burst with a queue of limit bytes.
func (l *Link) SetQueue(limit int) error {
	_, err := run("tc", "qdisc", "replace", "dev", l.HostDev, "root", "tbf", "rate", l.Rate,
		"burst", strconv.Itoa(l.Burst), "limit", strconv.Itoa(limit))
	return err
}

var dropped = regexp.MustCompile(`dropped (\d+)`)

// Drops is the packets the host side's qdisc dropped so far.
func (l *Link) Drops() (uint64, error) {
	out, err := run("tc", "-s", "qdisc", "show", "dev", l.HostDev)
	if err != nil {
		return 0, err
	}
	m := dropped.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("farmbench: no drop count in tc's output %q", out)
	}
	return strconv.ParseUint(m[1], 10, 64)
}

// Command returns cmd made to run inside the namespace.
func (l *Link) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", l.NS, name}, args...)...)
}

// Close removes the namespace (and with it the veth pair). Errors are
// ignored: it also cleans up after a run that never finished.
func (l *Link) Close() {
	_, _ = run("ip", "link", "del", l.HostDev)
	_, _ = run("ip", "netns", "del", l.NS)
}
