//go:build ucx

package ucx

// Resources is the count of UCX resources alive in this process.
func Resources() map[string]int64 {
	return map[string]int64{
		"workers": live.workers.Load(), "listeners": live.listeners.Load(), "endpoints": live.endpoints.Load(),
		"memh": live.memh.Load(), "requests": live.requests.Load(),
	}
}
