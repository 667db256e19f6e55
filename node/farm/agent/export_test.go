package agent

// stoppedNow reports whether the agent has taken the run's stop (tests).
func (a *Agent) stoppedNow() bool {
	done := make(chan bool, 1)
	if a.post(a.ctx, func() { done <- a.stopped }) != nil {
		return false
	}
	return <-done
}

func (a *Agent) drainingNow() bool {
	done := make(chan bool, 1)
	if a.post(a.ctx, func() { done <- a.draining }) != nil {
		return false
	}
	return <-done
}
