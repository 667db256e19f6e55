package builder

import "slices"

// Absent sources (event mode without Config.Assigned). A configured source
// that has sent nothing makes every event wait out Timeout and end
// incomplete. The node can declare such sources absent (SetAbsent: the
// ones silent since the run began, or missing from an embedded emulator's
// file): events then no longer wait for them and go out, incomplete, as
// soon as every other source is in. Only a source that has sent nothing may
// be absent, so an absent source is in no open event; its first fragment
// makes it present again and events wait for it from then on.

// SetAbsent declares the sources of ids absent: events stop waiting for
// them. Ids of unknown sources and of sources that have already sent are
// left out; it returns the ids it declared absent (sorted). Open events
// that now have every present source go out at once. In timeslice and
// assigned modes it does nothing and returns nil (a farm masks sources
// through its assignments).
func (b *Builder) SetAbsent(ids []uint32) []uint32 {
	if b.isTS || b.cfg.Assigned {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []uint32
	for _, id := range ids {
		s, ok := b.sourceIndex(id)
		if !ok || b.absent[s] || b.ident.src[s].n > 0 {
			continue
		}
		b.absent[s] = true
		b.want--
		out = append(out, id)
	}
	if len(out) == 0 {
		return nil
	}
	for ev := b.head; ev != nil; {
		next := ev.next
		if !ev.held && ev.present >= b.want {
			b.emitLocked(ev)
		}
		ev = next
	}
	b.checkLocked("SetAbsent")
	slices.Sort(out)
	return out
}

// Absent returns the sources absent now (sorted ids).
func (b *Builder) Absent() []uint32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []uint32
	for s, a := range b.absent {
		if a {
			out = append(out, b.ids[s])
		}
	}
	slices.Sort(out)
	return out
}

// presentAgainLocked: absent source s sent a fragment.
func (b *Builder) presentAgainLocked(s int32) {
	b.absent[s] = false
	b.want++
}
