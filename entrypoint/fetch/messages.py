"""Every sentence `fetch-assets` prints or raises: the `fetch` section of the message catalogue."""

from __future__ import annotations

from entrypoint.core.messages import Catalogue

MESSAGES = Catalogue(
    "fetch",
    {
        # ---------------------------------------------------------------- the run (command.py)
        "start": (
            "fetch-assets: {count} entries from {source} into {root}",
            "fetch-assets:{count} 个条目,来源 {source},目标 {root}",
        ),
        "absolute-urls": ("(absolute URLs)", "(绝对地址)"),
        "entry-line": ("  {name}  {status}  [{url} -> {target}]", "  {name}  {status}  [从 {url} 到 {target}]"),
        "fetched": (
            "fetched {count} of {total} entries: {amount} in {duration} ({rate}/s)",
            "已获取 {count}/{total} 个条目:{amount},用时 {duration}({rate}/s)",
        ),
        "fetched-instantly": (
            "fetched {count} of {total} entries: {amount} in {duration}",
            "已获取 {count}/{total} 个条目:{amount},用时 {duration}",
        ),
        "nothing-to-fetch": ("nothing to fetch: every entry is complete", "无需下载:所有条目均已完整"),
        "interrupted": (
            "interrupted: {name} is saved where it stopped; run the same command to resume",
            "已中断:{name} 的进度已保存;再次运行同一命令即可继续",
        ),
        "entry-note": ("  {name}: {note}", "  {name}:{note}"),
        "entry-done": (
            "  {name}: done, {amount} in {duration} ({rate}/s), files: {files}, verified: {verified}",
            "  {name}:完成,{amount},用时 {duration}({rate}/s),文件数 {files},已校验:{verified}",
        ),
        "entry-done-sha256": (
            "  {name}: done, {amount} in {duration} ({rate}/s), files: {files}, verified: {verified}, sha256 {sha256}",
            "  {name}:完成,{amount},用时 {duration}({rate}/s),文件数 {files},已校验:{verified},sha256 {sha256}",
        ),
        "moved-aside": (
            "  {name}: {count} existing paths differed and were moved aside: {paths}",
            "  {name}:{count} 个已有路径内容不同,已移到一旁:{paths}",
        ),
        # ---------------------------------------------------------------- the assets root and sizes (root.py, sizes.py)
        "root-missing": (
            "the assets root {root} ({given}) does not exist; its nearest existing folder {existing} is on {where}. "
            "The CFS mount may be missing: fetch-assets does not create a missing root by itself, so that 55 GB "
            "never land on a disk no job sees",
            "资源根目录 {root}({given})不存在;最近的已存在目录 {existing} 位于{where}。可能缺少 CFS 挂载:"
            "fetch-assets 不会自行创建缺失的根目录,以免 55 GB 数据落到任务看不到的磁盘上",
        ),
        "root-missing-fix": (
            "Mount CFS at {root} (or point --assets-root / VLA_ASSETS_ROOT at the folder where CFS is mounted); to "
            "create {root} here on purpose, add --create-root.",
            "请把 CFS 挂载到 {root}(或让 --assets-root / VLA_ASSETS_ROOT 指向 CFS 的挂载目录);"
            "如确实要在此创建 {root},请加上 --create-root。",
        ),
        "root-given-flag": ("from --assets-root", "来自 --assets-root"),
        "root-given-env": ("from VLA_ASSETS_ROOT", "来自 VLA_ASSETS_ROOT"),
        "root-given-default": ("the default", "默认值"),
        "root-given-job-file": ("from {source}", "来自 {source}"),
        "root-created": ("created the assets root {root} on {where}", "已创建资源根目录 {root},位于{where}"),
        "root-would-create": (
            "the assets root {root} does not exist: --create-root would create it on {where}",
            "资源根目录 {root} 不存在:--create-root 将在{where}上创建它",
        ),
        "root-own-disk": (
            "note: {root} is on {where}, not on a mounted CFS: a TI-ONE job will not see what is fetched here",
            "注意:{root} 位于{where},不在挂载的 CFS 上:TI-ONE 任务看不到在此下载的内容",
        ),
        "entry-line-sized": (
            "  {name}  {status}  {size}  [{url} -> {target}]",
            "  {name}  {status}  {size}  [从 {url} 到 {target}]",
        ),
        "size-known": ("size {size}", "大小 {size}"),
        "size-no-answer": (
            "size unknown (offline: no answer within {seconds:g} s)",
            "大小未知(离线:{seconds:g} 秒内无应答)",
        ),
        "size-unreachable": ("size unknown (offline or unreachable: {reason})", "大小未知(离线或无法访问:{reason})"),
        "size-http": ("size unknown (HTTP {status})", "大小未知(HTTP {status})"),
        "size-no-length": ("size unknown (no Content-Length)", "大小未知(无 Content-Length)"),
        "size-not-a-file": ("size unknown (not a file)", "大小未知(不是文件)"),
        "dry-run-total-unknown": (
            "dry run: {unknown} entries to fetch, of unknown size; nothing was written",
            "试运行:{unknown} 个条目需下载,大小未知;未写入任何内容",
        ),
        "dry-run-total": (
            "dry run: {amount} to fetch for {count} entries; nothing was written",
            "试运行:{count} 个条目需下载 {amount};未写入任何内容",
        ),
        "dry-run-total-partial": (
            "dry run: {amount} to fetch for {count} entries, plus {unknown} of unknown size; nothing was written",
            "试运行:{count} 个条目需下载 {amount},另有 {unknown} 个大小未知;未写入任何内容",
        ),
        # ---------------------------------------------------------------- the final check (command.py)
        "check-heading": ("assets under {root}", "{root} 下的资源"),
        "not-ready": (
            "the assets are not ready: fix what the checks above report before submitting a job",
            "资源尚未就绪:请先修复上面检查报告的问题再提交任务",
        ),
        "job-settings": ("TI-ONE job settings (task-based modeling > new job):", "TI-ONE 任务设置(任务式建模 > 新建):"),
        "job-image": ("  image:          {image}", "  训练镜像:       {image}"),
        "image-placeholder": (
            "<the image you pushed with scripts/push_image.py>",
            "<用 scripts/push_image.py 推送的镜像>",
        ),
        "job-mode": (
            "  training mode:  DDP, N nodes of whole 8-GPU machines",
            "  训练模式:       DDP,N 个整机 8 卡节点",
        ),
        "job-storage": (
            "  storage:        one row: CFS {source} -> {mount}",
            "  存储路径:       仅一行:CFS {source} -> {mount}",
        ),
        "cfs-relative": ("<CFS root>/{relative}", "<CFS 根目录>/{relative}"),
        "cfs-mounted": ("<the CFS folder mounted here at {root}>", "<此处挂载于 {root} 的 CFS 目录>"),
        "job-command": (
            "  start command:  (leave empty: the image's default command runs vla-entrypoint)",
            "  启动命令:       (留空:镜像默认命令会运行 vla-entrypoint)",
        ),
        # ---------------------------------------------------------------- sources (job.py)
        "kept-tarball": ("  {name}: unpacking the kept tarball {path}", "  {name}:使用保留的归档 {path} 解压"),
        "optional-missing": (
            "  {name}: optional and not available ({what}): skipped",
            "  {name}:可选条目不可用({what}):已跳过",
        ),
        "probe-failed": ("{name}: {what}", "{name}:{what}"),
        "probe-failed-fix": ("{fix} No download was started.", "{fix} 尚未开始任何下载。"),
        "size-differs": (
            "{name}: the server's file is {remote} bytes, the manifest pins {pinned}",
            "{name}:服务器上的文件为 {remote} 字节,清单固定为 {pinned} 字节",
        ),
        "size-differs-fix": (
            "The file on the server is a different version, or the manifest is out of date: fix one of them.",
            "服务器上的文件版本不同,或清单已过期:请修正其中之一。",
        ),
        "no-ranges": (
            "  {name}: the server does not support range requests: one stream, and an interruption re-reads the "
            "bytes before the resume point",
            "  {name}:服务器不支持范围请求:单连接下载,中断后需重新读取续传点之前的字节",
        ),
        # ---------------------------------------------------------------- one entry (job.py)
        "server-changed": (
            "the file on the server changed since the interrupted run; starting it over",
            "服务器上的文件在上次中断后已更新;将重新开始",
        ),
        "server-changed-kept": (
            "the file on the server changed since the interrupted run; starting it over (the old partial copy is "
            "kept at {path}; delete it when done)",
            "服务器上的文件在上次中断后已更新;将重新开始(旧的部分副本保留在 {path},可自行删除)",
        ),
        "stale-staging": (
            "a staging folder without a saved state was set aside at {path}; delete it when done",
            "没有保存状态的暂存目录已移到 {path},可自行删除",
        ),
        "rereads-archive": (
            "this run reads the archive from its start again but skips the {members} members already unpacked",
            "本次从头读取归档,但跳过已解压的 {members} 个成员",
        ),
        "special-members": (
            "{count} special members (devices, pipes) were not unpacked",
            "{count} 个特殊成员(设备、管道)未解压",
        ),
        "no-sha-state": (
            "the download was resumed without a saved sha256 state: its sha256 cannot be computed "
            "(the gzip CRC-32 and length are still checked)",
            "续传时没有保存的 sha256 状态:无法计算 sha256(仍会校验 gzip CRC-32 与长度)",
        ),
        "tarball-not-kept": (
            "--keep-tarballs: this download resumed without the start of the tarball, so it is not kept",
            "--keep-tarballs:本次续传缺少归档开头部分,因此不保留归档",
        ),
        "archive-damaged": ("the archive is damaged: {error}", "归档损坏:{error}"),
        "archive-short": ("the archive ended after {got} of {size} bytes", "归档在 {got}/{size} 字节处结束"),
        "download-short": ("the download ended after {got} of {size} bytes", "下载在 {got}/{size} 字节处结束"),
        "sha-mismatch": (
            "sha256 {digest} is not the manifest's {expected}",
            "sha256 为 {digest},与清单中的 {expected} 不符",
        ),
        "verified-size": ("size", "大小"),
        "verified-crc": ("gzip CRC-32", "gzip CRC-32 校验"),
        "verified-sha256": ("sha256 as pinned", "sha256(与清单一致)"),
        "verified-sha256-skipped": (
            "sha256 NOT checked (resumed without its state)",
            "未校验 sha256(续传时没有保存的状态)",
        ),
        "verified-stream": ("complete stream", "数据流完整"),
        "verify-failed": (
            "{name}: {what}; nothing was moved into {root}, the bad copy is kept at {kept}",
            "{name}:{what};未放入 {root},损坏的副本保留在 {kept}",
        ),
        "verify-failed-nothing-kept": (
            "{name}: {what}; nothing was moved into {root} and no copy was kept",
            "{name}:{what};未放入 {root},也未保留副本",
        ),
        "verify-failed-fix": (
            "Check the source (a different file version? a pinned sha256 or size that is out of date?), then run "
            "again: the entry starts over. Delete the kept copy once you no longer need it.",
            "请检查来源(文件版本不同?清单中固定的 sha256 或大小已过期?)后再次运行:该条目将重新开始。"
            "不需要时可删除保留的副本。",
        ),
        "download-fix-resume": (
            "{fix} Running the same command again resumes where it stopped.",
            "{fix} 再次运行同一命令即可从中断处继续。",
        ),
        # ---------------------------------------------------------------- an entry's state (status.py)
        "state-complete": (
            "complete (fetched {finished}, {files} files as recorded)",
            "已完整({finished} 下载,{files} 个文件与记录一致)",
        ),
        "state-complete-adopted": ("complete (found in place, passes its check)", "已完整(已存在且通过检查)"),
        "state-changed": (
            "files changed since it was fetched ({paths}): fetching it again",
            "下载后文件有变动({paths}):将重新获取",
        ),
        "state-resume-file": ("interrupted earlier: resuming from byte {at}", "此前中断:将从第 {at} 字节继续"),
        "state-resume-archive": (
            "interrupted earlier: resuming from byte {at} ({members} members already unpacked)",
            "此前中断:将从第 {at} 字节继续(已解压 {members} 个成员)",
        ),
        "state-forced": ("fetching it again (--force)", "重新获取(--force)"),
        "state-adopted": (
            "already in place (passes its check): not downloaded; --force fetches it again",
            "已就位(通过检查):不再下载;--force 可强制重新获取",
        ),
        "state-partial-tree": (
            "{paths} exists but is incomplete (an interrupted tar -xf?): it will be completed from the archive; "
            "files the archive also has are replaced (a different one is kept as *.old-<time>), others are left alone",
            "{paths} 已存在但不完整(tar -xf 曾中断?):将用归档补全;归档中同名文件被替换(内容不同的保留为 "
            "*.old-<时间>),其他文件保持不动",
        ),
        "state-missing": ("not present: will be fetched", "不存在:将下载"),
        # ---------------------------------------------------------------- the state folder (workspace.py)
        "disk-full": (
            "no space left on the file system of {where} ({free} free)",
            "{where} 所在文件系统空间不足(剩余 {free})",
        ),
        "disk-full-fix": (
            "Free space (or grow the CFS), then run the same command again. It resumes where it stopped.",
            "请释放空间(或扩容 CFS)后再次运行同一命令。将从中断处继续。",
        ),
        "not-writable": ("cannot write under {where}: {reason}", "无法写入 {where}:{reason}"),
        "not-writable-fix": (
            "Mount the CFS read-write on this dev machine (or pick another --assets-root), then run again.",
            "请在开发机上以读写方式挂载 CFS(或换一个 --assets-root)后再次运行。",
        ),
        "io-failed": ("a file operation failed: {error}", "文件操作失败:{error}"),
        "io-failed-fix": (
            "Check the storage, then run the same command again. It resumes where it stopped.",
            "请检查存储后再次运行同一命令。将从中断处继续。",
        ),
        "busy": ("another fetch-assets is already filling {root}", "另一个 fetch-assets 正在写入 {root}"),
        "busy-fix": ("Wait for it to finish (or stop it), then run again.", "请等待其结束(或停止它)后再运行。"),
        "no-space": (
            "the entries left need about {needed} but only {free} is free under {root}",
            "剩余条目约需 {needed},但 {root} 下仅剩 {free}",
        ),
        "no-space-fix": (
            "Free space (or grow the CFS), or fetch fewer entries at a time (--only/--skip).",
            "请释放空间(或扩容 CFS),或分批获取(--only/--skip)。",
        ),
        # ---------------------------------------------------------------- progress lines (progress.py)
        "progress-amount": ("{done} of {total} {percent}%", "{done} / {total} {percent}%"),
        "progress-eta": ("ETA {left}", "剩余 {left}"),
        "progress-overall": ("| all {amount}", "| 总计 {amount}"),
        # ---------------------------------------------------------------- the manifest (manifest.py)
        "manifest-missing": ("the manifest {path} does not exist", "清单 {path} 不存在"),
        "manifest-missing-fix": ("Check the path given to --manifest.", "请检查 --manifest 的路径。"),
        "manifest-unreadable": ("cannot read the manifest {path}: {error}", "无法读取清单 {path}:{error}"),
        "manifest-unreadable-fix": (
            "Give a readable UTF-8 YAML file to --manifest.",
            "请为 --manifest 提供可读的 UTF-8 YAML 文件。",
        ),
        "manifest-yaml": (
            "the manifest {label} is not valid YAML{at}: {problem}",
            "清单 {label} 不是合法的 YAML{at}:{problem}",
        ),
        "yaml-position": (" (line {line}, column {column})", "(第 {line} 行,第 {column} 列)"),
        "manifest-yaml-fix": (
            "Fix the syntax at that line (check indentation and quotes).",
            "请修正该行语法(检查缩进与引号)。",
        ),
        "manifest-not-mapping": (
            "the manifest {label} must be a mapping with 'entries'",
            "清单 {label} 必须是含 'entries' 的映射",
        ),
        "manifest-not-mapping-fix": (
            "Start from the built-in manifest (see the README).",
            "请参照内置清单编写(见 README)。",
        ),
        "unknown-key": ("unknown key '{key}' in {where}", "{where} 中有未知的键 '{key}'"),
        "did-you-mean": ("Did you mean '{name}'?", "是否应为 '{name}'?"),
        "known-keys": ("Known keys: {keys}.", "可用的键:{keys}。"),
        "base-url-invalid": ("base_url must be a URL or a folder path", "base_url 必须是地址或目录路径"),
        "base-url-invalid-fix": ("Give the URL the files are under.", "请填写文件所在的地址。"),
        "no-entries": ("the manifest {label} lists no entries", "清单 {label} 没有任何条目"),
        "no-entries-fix": ("Add a list under 'entries:'.", "请在 'entries:' 下添加列表。"),
        "duplicate-name": ("two entries are named '{name}'", "有两个条目都叫 '{name}'"),
        "duplicate-name-fix": ("Give every entry its own name.", "请为每个条目取不同的名称。"),
        "entry-not-mapping": (
            "{where} must be a mapping (name, url, into or to, …)",
            "{where} 必须是映射(name、url、into 或 to …)",
        ),
        "entry-not-mapping-fix": (
            "Write each entry as 'key: value' lines under '- name: …'.",
            "请以 '- name: …' 开头、逐行写 'key: value'。",
        ),
        "bad-name": ("{where}.name={name} is not a plain name", "{where}.name={name} 不是合法名称"),
        "bad-name-fix": ("Use letters, digits, '.', '_', '-'.", "请只用字母、数字、'.'、'_'、'-'。"),
        "no-url": ("{where} has no url", "{where} 缺少 url"),
        "no-url-fix": (
            "Add the file's URL (or a path relative to base_url).",
            "请填写文件地址(或相对 base_url 的路径)。",
        ),
        "relative-without-base": (
            "{where}={url} is relative but the manifest has no base_url",
            "{where}={url} 是相对地址,但清单没有 base_url",
        ),
        "relative-without-base-fix": (
            "Add base_url to the manifest or pass --base-url.",
            "请在清单中添加 base_url,或使用 --base-url。",
        ),
        "into-or-to": (
            "{where} needs exactly one of 'into' (an archive) or 'to' (a single file)",
            "{where} 必须且只能有 'into'(归档)或 'to'(单个文件)之一",
        ),
        "into-or-to-fix": (
            "Archives unpack 'into' a folder; single files are saved 'to' a path.",
            "归档用 'into' 指定解压目录;单个文件用 'to' 指定路径。",
        ),
        "path-empty": ("{where} must be a non-empty relative path", "{where} 必须是非空的相对路径"),
        "path-empty-fix": (
            "Give a path relative to the assets root, such as datasets.",
            "请填写相对于资源根目录的路径,例如 datasets。",
        ),
        "path-leaves-root": ("{where}={value} leaves the assets root", "{where}={value} 指向资源根目录之外"),
        "path-leaves-root-fix": (
            "Use a path inside the assets root (no leading '/', no '..').",
            "请使用资源根目录内的路径(不以 '/' 开头,不含 '..')。",
        ),
        "unknown-format": (
            "{where}: cannot tell the archive type of {name}",
            "{where}:无法判断 {name} 的归档类型",
        ),
        "unknown-format-fix": ("Use one of {formats} or set format.", "请使用 {formats} 之一,或设置 format。"),
        "format-not-archive": (
            "{where}: 'format' applies to archives ('into') only",
            "{where}:'format' 只适用于归档('into')",
        ),
        "format-not-archive-fix": ("Remove format, or unpack the file with into.", "请删除 format,或改用 into 解压。"),
        "provides-invalid": (
            "{where}.provides must be a path or a list of paths",
            "{where}.provides 必须是路径或路径列表",
        ),
        "provides-invalid-fix": (
            "List what the entry puts in place, relative to the assets root.",
            "请列出该条目放置的内容(相对资源根目录)。",
        ),
        "check-unknown": ("{where}.check={check} is not one of {checks}", "{where}.check={check} 不是 {checks} 之一"),
        "check-unknown-fix": ("Use one of {checks}.", "请使用 {checks} 之一。"),
        "check-needs-provides": (
            "{where}: check '{check}' needs 'provides'",
            "{where}:check '{check}' 需要 'provides'",
        ),
        "check-needs-provides-fix": ("Say which path the check looks at.", "请说明检查哪个路径。"),
        "size-invalid": ("{where}.size={size} is not a byte count", "{where}.size={size} 不是字节数"),
        "size-invalid-fix": ("Give the size in bytes, or leave it out.", "请填写字节数,或省略。"),
        "sha256-invalid": ("{where}.sha256 is not 64 hexadecimal digits", "{where}.sha256 不是 64 位十六进制数"),
        "sha256-invalid-fix": ("Paste the output of sha256sum, or leave it out.", "请粘贴 sha256sum 的输出,或省略。"),
        "option-out-of-range": (
            "{flag} {value} is out of range: expected {expected} from {low} to {high}",
            "{flag} {value} 超出范围:应为 {low} 到 {high} 之间的{expected}",
        ),
        "option-out-of-range-fix": (
            "Give {flag} a value from {low} to {high}.",
            "请为 {flag} 指定 {low} 到 {high} 之间的值。",
        ),
        "a-whole-number": ("a whole number", "整数"),
        "a-number": ("a number", "数字"),
        "base-url-malformed-fix": (
            "Fix the base URL ({where}): https://host/folder or https://host:port/folder, or a local folder.",
            "请修正基础地址({where}):https://host/folder、https://host:port/folder 或本地目录。",
        ),
        "optional-invalid": ("{where}.optional must be true or false", "{where}.optional 必须是 true 或 false"),
        "optional-invalid-fix": ("Write optional: true or leave it out.", "请写 optional: true 或省略。"),
        "url-refused-fix": ("{fix} (plain http needs --allow-http)", "{fix}(明文 http 需要 --allow-http)"),
        "url-invalid": ("{url} is not a valid URL", "{url} 不是合法的地址"),
        "url-invalid-fix": (
            "Give a URL such as https://host/path/file.tar.gz (spaces must be written %20).",
            "请填写形如 https://host/path/file.tar.gz 的地址(空格须写作 %20)。",
        ),
        "url-no-file": ("{url} names no file", "{url} 未指明文件名"),
        "url-no-file-fix": ("Give the URL of the file itself.", "请提供文件本身的地址。"),
        "unknown-entry": (
            "{flag} names '{name}', which the manifest does not have",
            "{flag} 指定的 '{name}' 不在清单中",
        ),
        "unknown-entry-fix": ("Entries: {names}.", "条目:{names}。"),
        "unknown-entry-fix-close": ("Did you mean '{close}'? Entries: {names}.", "是否应为 '{close}'?条目:{names}。"),
        # ---------------------------------------------------------------- archives (unpack.py)
        "zlib-failed": ("zlib could not {step} (code {code})", "zlib 无法{step}(代码 {code})"),
        "zlib-initialise": ("initialise the decoder", "初始化解码器"),
        "zlib-prime": ("prime the decoder", "预置解码器"),
        "zlib-window": ("set the decoder's window", "设置解码器窗口"),
        "zlib-reset": ("reset the decoder", "重置解码器"),
        "gzip-crc": (
            "the gzip CRC-32 check failed near byte {at}: the unpacked data does not match the checksum the archive "
            "records (damaged download?)",
            "gzip CRC-32 校验失败(第 {at} 字节附近):解压后的数据与归档记录的校验和不符(下载损坏?)",
        ),
        "gzip-length": (
            "the gzip length check failed near byte {at}: the unpacked data is not the length the archive records "
            "(damaged download?)",
            "gzip 长度校验失败(第 {at} 字节附近):解压后的数据长度与归档记录的不符(下载损坏?)",
        ),
        "trailing-bytes": (
            "unexpected bytes after the end of the compressed data (byte {at})",
            "压缩数据结束后出现多余字节(第 {at} 字节)",
        ),
        "corrupt-data": ("corrupt compressed data near byte {at}: {detail}", "第 {at} 字节附近的压缩数据损坏:{detail}"),
        "ends-early": (
            "the archive ends early: the compressed data stops at byte {at} (truncated download?)",
            "归档提前结束:压缩数据在第 {at} 字节处中断(下载不完整?)",
        ),
        "decoder-stuck": ("the decoder made no progress at byte {at}", "解码在第 {at} 字节处停滞"),
        "not-tar": (
            "not a valid tar archive at byte {at} of the decoded data: {error}",
            "解码后数据第 {at} 字节处不是有效的 tar 归档:{error}",
        ),
        "tar-damaged": ("damaged tar archive: {error}", "tar 归档损坏:{error}"),
        "member-truncated": ("the archive ends inside {path}", "归档在 {path} 内部提前结束"),
        "unsafe-member": ("unsafe archive member refused: {reason}", "已拒绝不安全的归档成员:{reason}"),
        "unsafe-member-escapes": (
            "unsafe archive member refused: {name} leaves the destination",
            "已拒绝不安全的归档成员:{name} 指向目标目录之外",
        ),
        "unsafe-member-link": (
            "unsafe archive member refused: link {name} points outside the destination",
            "已拒绝不安全的归档成员:链接 {name} 指向目标目录之外",
        ),
        "unsafe-member-device": (
            "unsafe archive member refused: {name} is a device or pipe",
            "已拒绝不安全的归档成员:{name} 是设备或管道",
        ),
    },
)
