package node

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/schemas"
)

// FarmRunConfig is a node's view of its run as a farm records it: the
// run number, the farm section's protocol, unit, assignment size, release
// policy, max outstanding (pull) and release group, the source groups,
// and the online and replay trigger stages with their plugins' SHA-256
// digests, parameters and prescales. `sluice farm start --config` records
// it; an agent refuses to join a run whose record differs. Errors: a
// source list that does not parse, a plugin that cannot be read, or what
// farm.RunConfig.Validate says.
func FarmRunConfig(nc *config.Config) (farm.RunConfig, error) {
	f := nc.Farm
	rc := farm.RunConfig{Schema: farm.RunConfigSchema, Run: nc.Run, Protocol: f.Protocol, Unit: f.Unit,
		AssignmentSize: f.AssignmentSize, Release: f.Release, ReleaseGroup: f.ReleaseGroup}
	if f.Protocol == "pull" {
		rc.MaxOutstanding, rc.MaxRequests = f.MaxOutstanding, f.MaxRequests
	}
	for _, g := range nc.Sources {
		ids, err := schemas.ParseSourceList(g.Sources)
		if err != nil {
			return farm.RunConfig{}, fmt.Errorf("sources %s: %w", g.Name, err)
		}
		rc.Sources = append(rc.Sources, farm.SourceGroup{Name: g.Name, Sources: schemas.FormatSourceList(ids)})
	}
	for _, s := range nc.Trigger.Stages {
		d, err := fileDigest(s.Plugin)
		if err != nil {
			return farm.RunConfig{}, fmt.Errorf("trigger stage %s: plugin: %w", s.Name, err)
		}
		rc.Plugins = append(rc.Plugins, farm.Plugin{Stage: s.Name, Name: filepath.Base(s.Plugin), Digest: d, Params: s.Params})
		if len(s.Prescales) > 0 {
			if rc.Prescales == nil {
				rc.Prescales = map[string]map[string]uint32{}
			}
			rc.Prescales[s.Name] = s.Prescales
		}
	}
	return rc, rc.Validate()
}

// fileDigest is the hex SHA-256 of a file.
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
