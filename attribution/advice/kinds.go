package advice

// FindingKind says each finding's kind (Finding).

func (CacheMiss) FindingKind() string      { return KindCacheMiss }
func (Persist) FindingKind() string        { return KindPersist }
func (FileRead) FindingKind() string       { return KindFileRead }
func (NoCacheCompile) FindingKind() string { return KindNoCache }
func (LateCompiles) FindingKind() string   { return KindLate }
func (RecurringRead) FindingKind() string  { return KindRecurring }
func (SlowFSRead) FindingKind() string     { return KindSlowFS }
func (DownloadStall) FindingKind() string  { return KindStall }
func (SilentWait) FindingKind() string     { return KindSilent }
func (SlowLookup) FindingKind() string     { return KindSlowDNS }
func (BrokenCache) FindingKind() string    { return KindBroken }
func (CacheCandidate) FindingKind() string { return KindCandidate }
func (CacheChange) FindingKind() string    { return KindCacheChange }
