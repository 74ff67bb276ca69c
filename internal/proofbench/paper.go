package proofbench

// PaperFigure is one of the PEC paper's microbenchmark figures: the
// average over 1,000 random keys, with the minimum and the maximum.
type PaperFigure struct {
	Avg float64 `json:"avg"`
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// Paper is what "Towards Sustainable Evolution for the TLS PKI" (PEC, ASIA
// CCS 2018, §6.1) reports for one sorted tree, measured on an Intel
// i7-4790, so that a run prints its own figures beside the bar it set.
type Paper struct {
	Source string `json:"source"`
	Leaves uint64 `json:"leaves"`
	// Generation and proof size are comparable as they stand.
	GenPresenceUs PaperFigure `json:"gen_presence_us"`
	GenAbsenceUs  PaperFigure `json:"gen_absence_us"`
	// The paper's verifier reconstructs the root from the proof and
	// checks the root's signature and freshness, as the Result's "sig"
	// rows do (one checkpoint signature).
	VerifyPresenceUs PaperFigure `json:"verify_presence_us"`
	VerifyAbsenceUs  PaperFigure `json:"verify_absence_us"`
	// The paper's sizes appear to include the signed root: the
	// counterpart is the proof with a detached signature.
	PresenceBytes PaperFigure `json:"presence_bytes"`
	AbsenceBytes  PaperFigure `json:"absence_bytes"`
	// TreeMemoryMB is the RAM the sorted tree took; StorageMB what it
	// was stored in (for CT the sorted tree, for revocation the CRL).
	TreeMemoryMB float64 `json:"tree_memory_mb"`
	StorageMB    float64 `json:"storage_mb"`
}

// PaperCT is the PEC paper's Table 1 (§6.1.1): Symantec's CT log of
// 2,129,920 certificates.
func PaperCT() *Paper {
	return &Paper{
		Source:           "PEC, ASIA CCS 2018, Table 1 (§6.1.1)",
		Leaves:           2129920,
		GenPresenceUs:    PaperFigure{Avg: 60, Min: 51, Max: 135},
		GenAbsenceUs:     PaperFigure{Avg: 92, Min: 81, Max: 200},
		VerifyPresenceUs: PaperFigure{Avg: 189, Min: 181, Max: 396},
		VerifyAbsenceUs:  PaperFigure{Avg: 237, Min: 227, Max: 465},
		PresenceBytes:    PaperFigure{Avg: 1018, Min: 1018, Max: 1018},
		AbsenceBytes:     PaperFigure{Avg: 1146, Min: 1070, Max: 1466},
		TreeMemoryMB:     293,
		StorageMB:        68,
	}
}

// PaperRevocation is the PEC paper's Table 2 (§6.1.2): Comodo's largest
// CRL, 53,164 revoked serial numbers.
func PaperRevocation() *Paper {
	return &Paper{
		Source:           "PEC, ASIA CCS 2018, Table 2 (§6.1.2)",
		Leaves:           53164,
		GenPresenceUs:    PaperFigure{Avg: 39, Min: 38, Max: 83},
		GenAbsenceUs:     PaperFigure{Avg: 65, Min: 61, Max: 90},
		VerifyPresenceUs: PaperFigure{Avg: 167, Min: 165, Max: 277},
		VerifyAbsenceUs:  PaperFigure{Avg: 207, Min: 202, Max: 233},
		PresenceBytes:    PaperFigure{Avg: 799, Min: 798, Max: 800},
		AbsenceBytes:     PaperFigure{Avg: 919, Min: 848, Max: 1282},
		TreeMemoryMB:     8.2,
		StorageMB:        1.9,
	}
}
