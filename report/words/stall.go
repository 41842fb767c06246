package words

import (
	"fmt"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/report/format"
)

// stallWhat names what stalled: "download of model.bin", or
// "connection 2 of 3 of the download of model.bin".
func stallWhat(s advice.DownloadStall) string {
	what := "download"
	if s.Connection > 0 {
		what = fmt.Sprintf("connection %d of %d of the download", s.Connection, s.Connections)
	}
	if s.Download != "" {
		what += " of " + s.Download
	}
	return what
}

// stallSentence: "download of model.bin from hub.example stalled for
// 8.0 s at +1.1 s after 12.0 MiB; 40% of its bytes came after the stall".
func stallSentence(s advice.DownloadStall) string {
	how := "stalled"
	if s.Slow {
		how = fmt.Sprintf("slowed to under 5%% of its median rate (%s in all)", format.Bytes(s.BytesDuring))
	}
	return fmt.Sprintf("%s from %s %s for %s at +%s after %s; %.0f%% of its bytes came after the stall",
		stallWhat(s), s.Host, how, tenths(s.LengthNS), tenths(s.StartNS), format.Bytes(s.BytesBefore), 100*s.AfterShare)
}

func stallAction(s advice.DownloadStall) string {
	return fmt.Sprintf("%s from %s: set a read timeout so a stalled connection is retried (huggingface_hub: HF_HUB_DOWNLOAD_TIMEOUT), or fetch it ahead of the run",
		stallWhat(s), s.Host)
}
