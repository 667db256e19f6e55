package farm

import (
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/schemas"
)

// Config is the farm section of a node's configuration file (`farm:`):
// which farm the node joins, in which roles, how it reaches etcd and its
// peers, and the run settings it expects the farm's run record to have
// (a node whose view differs refuses to join). An empty ID means the node
// runs alone (no farm).
type Config struct {
	// ID is the farm id ([A-Za-z0-9._-], 1..64 bytes); "" = not a farm node.
	ID string `yaml:"id"`
	// TokenFile holds the farm's shared token (whitespace trimmed): every
	// peer connection proves it knows it. Required in a farm.
	TokenFile string `yaml:"token_file"`
	// Roles: ru, bu, both, or em (an event manager candidate only: no
	// readout, no builder; EMCandidate must be true).
	Roles string `yaml:"roles"`
	// EMCandidate: the node campaigns for event manager.
	EMCandidate bool `yaml:"em_candidate"`
	// Etcd are the control plane's endpoints (host:port or URLs).
	Etcd []string `yaml:"etcd"`
	// Transport is the peer transport: tcp, or ucx (built with the ucx tag).
	Transport string `yaml:"transport"`
	// Listen is the peer transport's address (host:port, port 0: any);
	// Advertise the address peers dial ("" = the listening address).
	Listen    string `yaml:"listen"`
	Advertise string `yaml:"advertise"`
	// Protocol (push|pull), Unit (events|packets), AssignmentSize, Release
	// (received|decided|durable), MaxOutstanding and MaxRequests (pull)
	// and ReleaseGroup
	// are this node's view of the run (see RunConfig).
	Protocol       string `yaml:"protocol"`
	Unit           string `yaml:"unit"`
	AssignmentSize int    `yaml:"assignment_size"`
	Release        string `yaml:"release"`
	MaxOutstanding int    `yaml:"max_outstanding"`
	MaxRequests    int    `yaml:"max_requests"`
	ReleaseGroup   int    `yaml:"release_group"`
	// Sources are the sources this node's readout inputs deliver (a source
	// list, "0-511,600"): its RU's share of the run's sources. Required
	// for an RU.
	Sources string `yaml:"sources"`
	// TriggerSource is the source whose RU names the events to the EM.
	TriggerSource uint32 `yaml:"trigger_source"`
	// Wait is how long RUs and BUs wait for an assignment's missing data.
	Wait time.Duration `yaml:"wait"`
	// BehindLimit: an RU keeps an assignment waiting past Wait for a
	// source of its own that is behind it and still sending (a packet
	// within builder.behind_wait), up to this long after the assignment;
	// BUs wait for a live RU's final data up to this plus Wait. 0: an RU
	// waits Wait only.
	BehindLimit time.Duration `yaml:"behind_limit"`
	// LeaseTTL is the membership lease (etcd may grant more). Dead BUs and
	// RUs are found by heartbeats (PeerTimeout), not by the lease; a killed
	// EM's leadership lasts about this long, and a live node whose
	// keep-alives a stalled etcd cannot serve for this long is fenced.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// PeerTimeout: a peer link that carried nothing (heartbeats go every
	// fifth of it) for this long is lost, and the EM declares a BU behind
	// it dead. Short finds a stopped process fast; a loaded or
	// long-distance network needs longer, or live nodes are fenced.
	PeerTimeout time.Duration `yaml:"peer_timeout"`
}

// DefaultConfig is the farm section's defaults (not a farm: ID empty).
func DefaultConfig() Config {
	return Config{
		Roles: "both", EMCandidate: true, Etcd: []string{"127.0.0.1:2379"}, Transport: "tcp",
		Listen: "127.0.0.1:0", Protocol: "push", Unit: "events", AssignmentSize: 8,
		Release: "decided", MaxOutstanding: 4, ReleaseGroup: 8, Wait: time.Second, BehindLimit: 30 * time.Second, LeaseTTL: 5 * time.Second,
		PeerTimeout: 500 * time.Millisecond,
	}
}

// Enabled says whether the node is a farm node.
func (c Config) Enabled() bool { return c.ID != "" }

// ParsedRoles are the roles as bits, the EM candidate bit included.
// Errors: an unknown roles value.
func (c Config) ParsedRoles() (Roles, error) {
	var r Roles
	switch c.Roles {
	case "ru":
		r = RoleRU
	case "bu":
		r = RoleBU
	case "both":
		r = RoleRU | RoleBU
	case "em":
		// An EM-only node: what it runs is the election and, leading, the
		// EM (a fault test can kill the EM alone).
		if !c.EMCandidate {
			return 0, fmt.Errorf("roles %q with em_candidate false: the node would have no role", c.Roles)
		}
	default:
		return 0, fmt.Errorf("roles %q: want ru, bu, both or em", c.Roles)
	}
	if c.EMCandidate {
		r |= RoleEM
	}
	return r, nil
}

// Token reads the token file. Errors: the file cannot be read, or is empty.
func (c Config) Token() (string, error) {
	b, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("%s is empty", c.TokenFile)
	}
	return t, nil
}

// Preflight checks what the section refers to on this machine: the token
// file can be read and holds a token (a farm node that cannot read it
// would fail only after its other parts started). Nothing for a section
// that is not a farm's.
func (c Config) Preflight() conf.Problems {
	var ps conf.Problems
	if !c.Enabled() || c.TokenFile == "" {
		return ps
	}
	if _, err := c.Token(); err != nil {
		ps.Add("token_file", c.TokenFile, "want a readable file holding the farm's shared token: %v", err)
	}
	return ps
}

// Validate checks the section as written, paths relative to it ("roles").
// A section without an id (not a farm) is not checked further.
func (c Config) Validate() conf.Problems {
	var ps conf.Problems
	if !c.Enabled() {
		return ps
	}
	if !validFarmID(c.ID) {
		ps.Add("id", c.ID, "want 1..64 bytes of [A-Za-z0-9._-]")
	}
	if c.TokenFile == "" {
		ps.Add("token_file", c.TokenFile, "want the file holding the farm's shared token")
	}
	if _, err := c.ParsedRoles(); err != nil {
		if c.Roles == "em" {
			ps.Add("em_candidate", c.EMCandidate, "want true with roles: em (an EM-only node is an event manager candidate)")
		} else {
			ps.Add("roles", c.Roles, "want ru, bu, both or em")
		}
	}
	if r, err := c.ParsedRoles(); err == nil && r&RoleRU != 0 {
		if ids, err := schemas.ParseSourceList(c.Sources); err != nil || len(ids) == 0 {
			ps.Add("sources", c.Sources, "want the source ids this node's inputs deliver, e.g. \"0-511,600\" (an RU)")
		}
	}
	if len(c.Etcd) == 0 {
		ps.Add("etcd", c.Etcd, "want at least one etcd endpoint, host:port")
	}
	if c.Transport != "tcp" && c.Transport != "ucx" {
		ps.Add("transport", c.Transport, "want tcp or ucx")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		ps.Add("listen", c.Listen, "want host:port (port 0: any free port)")
	}
	if c.Advertise != "" {
		if _, _, err := net.SplitHostPort(c.Advertise); err != nil {
			ps.Add("advertise", c.Advertise, "want host:port, or empty for the listening address")
		}
	}
	if _, err := ParseProtocol(c.Protocol); err != nil {
		ps.Add("protocol", c.Protocol, "want push or pull")
	}
	if c.Unit != "events" && c.Unit != "packets" {
		ps.Add("unit", c.Unit, "want events or packets")
	}
	if c.AssignmentSize < 1 {
		ps.Add("assignment_size", c.AssignmentSize, "want >= 1 element per assignment")
	}
	if _, err := ParseOutcome(c.Release); err != nil || c.Release == "returned" {
		ps.Add("release", c.Release, "want received, decided or durable")
	}
	if c.MaxOutstanding < 1 {
		ps.Add("max_outstanding", c.MaxOutstanding, "want >= 1")
	}
	if c.MaxRequests < 0 {
		ps.Add("max_requests", c.MaxRequests, "want >= 0 (0: no bound)")
	}
	if c.ReleaseGroup < 1 {
		ps.Add("release_group", c.ReleaseGroup, "want >= 1")
	}
	if c.Wait <= 0 {
		ps.Add("wait", c.Wait, "want a positive duration such as 1s")
	}
	if c.BehindLimit < 0 {
		ps.Add("behind_limit", c.BehindLimit, "want >= 0 (0: an RU waits `wait` only)")
	}
	if c.PeerTimeout < 10*time.Millisecond {
		ps.Add("peer_timeout", c.PeerTimeout, "want at least 10ms (heartbeats go every fifth of it)")
	}
	if c.LeaseTTL < time.Second {
		ps.Add("lease_ttl", c.LeaseTTL, "want at least 1s")
	}
	return ps
}

func validFarmID(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
