package record

// GPU holds the NVML timeline. Nil means GPU sampling was not attempted;
// Unavailable says why there is no data ("no NVIDIA GPU (…)").
type GPU struct {
	Unavailable string      `json:"unavailable,omitempty"`
	Devices     []GPUDevice `json:"devices,omitempty"`
	Samples     []GPUSample `json:"samples,omitempty"`
}

// GPUDevice describes one GPU.
type GPUDevice struct {
	Index    int    `json:"index"`
	Name     string `json:"name"`
	UUID     string `json:"uuid,omitempty"`
	MemTotal uint64 `json:"mem_total_bytes"`
}

// GPUSample is one device's state at one instant.
type GPUSample struct {
	TNS          int64  `json:"t"`
	Device       int    `json:"dev"`
	UtilGPUPct   uint32 `json:"util"`
	UtilMemPct   uint32 `json:"mem_util"`
	MemUsedBytes uint64 `json:"mem_used"`
}
