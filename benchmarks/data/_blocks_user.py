"""Hand-written query/fact blocks: the user slot (global facts).

Format (parsed by _make.py):

    @ SLOT SCOPE                  section defaults (SCOPE "-" = global)
    Q KIND [scope=S]: text        a query (p = paraphrase, l = lexical, x = exact_token)
    F [key=K] [age=N] [tags=a,b] [scope=S] [slot=S]: text   a relevant fact
    D [stale] [age=N] [key=K] ...: text                    a hand-written distractor

Blocks are separated by blank lines; every query in a block has all the
block's F facts as its relevant set. ``stale`` distractors are outdated
versions of a relevant fact and are made older than it.
"""

BLOCKS = r"""
@ user -

Q p: which program do I write software in all day?
Q l: what code editor does the user prefer?
F key=editor: The user's editor is Helix with a custom keymap; she switched away from Neovim in early 2023.
D: The user still keeps an old Neovim config in her dotfiles repo for servers where nothing else is installed.

Q p: what command-line interpreter is set up on my machine?
Q l: which login shell does the user run?
F key=shell: The user runs fish as her login shell, with the starship prompt and vi key bindings.
D: Shell scripts in the user's dotfiles are written for POSIX sh so they also work on her home server.

Q p: what should I call the person I'm helping, and how do they refer to themselves?
Q x: who is Dana Okafor?
F key=name: The user is Dana Okafor and uses she/her pronouns.

Q p: where is my job and what's my title?
Q l: what is the user's role at Fernhill Goods?
F key=role: Dana is a staff backend engineer at Fernhill Goods, an online homeware retailer based in Lisbon.
D stale: Dana was promoted from senior to staff engineer; the old title still appears on some internal wiki pages.

Q p: what hours am I usually reachable, and in which region's clock?
Q l: what time zone does the user live in?
F key=timezone: The user lives in Lisbon (Europe/Lisbon time zone) and normally works from 09:30 to 18:00.
D: The user's sister lives in Toronto, so weekend video calls with family happen in the Lisbon evening.

Q p: can I schedule a sync with Dana at nine?
Q l: does the user accept meetings in the morning?
F key=calendar.mornings: The user blocks mornings until 11:00 for focused work and declines meetings before then.
D: The user's weekly 1:1 with her manager is on Thursday afternoons and is rarely moved.

Q p: how terse should replies be?
Q l: does the user like emoji and long paragraphs in answers?
F key=style.answers: The user wants short, direct answers without emoji, and bullet points instead of long paragraphs.

Q p: when I suggest an architecture, what should my write-up cover?
Q l: does the user want trade-offs explained when choosing between approaches?
F key=style.tradeoffs: When choosing between approaches, the user expects the trade-offs spelled out, including what was rejected and why.

Q p: how should I word the descriptions attached to each saved change in version control?
Q l: what commit message format does the user want?
F key=git.commits: The user writes commits in Conventional Commits format (feat:, fix:, chore:) and keeps each commit small.
D: The user squash-merges pull requests on GitHub so the main history has one entry per PR.

Q p: how do I bring upstream updates into my work-in-progress line of development?
Q l: does the user prefer rebase or merge for feature branches?
F key=git.integration: The user rebases branches onto main rather than merging main into them, and force-pushes with --force-with-lease.

Q p: how thorough should signature annotations and static checking be?
Q l: does the user want mypy in strict mode?
F key=python.typing: The user wants type hints on every function and runs mypy in strict mode on all new Python code.
D: The user thinks runtime type checking libraries like typeguard are not worth the overhead in production.

Q p: should I fake collaborators with doubles when verifying code?
Q l: how does the user feel about mocking in tests?
F key=testing.style: The user dislikes heavy mocking; she prefers pytest with real objects, fixtures and parametrize.

Q p: how wide can code get before it should wrap?
Q l: what line length and indentation does the user prefer?
F key=python.format: The user's preferred line length is 100 characters, formatted by ruff format, with 4-space indentation.

Q p: which installer should I reach for when adding third-party libraries?
Q l: does the user use poetry or uv for Python dependencies?
F key=python.packaging: The user manages Python environments and dependencies with uv and avoids poetry and conda.
D stale: The user tried pdm in 2022 for a side project but gave up after repeated lockfile issues.

Q p: who is my boss?
Q x: who is Ruth Abernathy to the user?
F key=manager: The user reports to Ruth Abernathy, VP of Engineering at Fernhill Goods.
D stale: Until the 2023 reorganisation the user reported to Carlos Mendes, head of platform.

Q p: how frequently is Dana responsible for the pager?
Q l: how often is the user on call?
F key=oncall: The user is on call one week in four; her rotation starts on Monday mornings.

Q p: when will she be away on holiday this summer?
Q l: when is the user on vacation in August?
F: The user is on vacation from 5 to 23 August 2024 and will not review PRs during that time.
D: The user took a long weekend in Madeira in April and asked that nothing be merged while she was away.

Q p: anything about her eyesight I should consider when picking a palette for plots?
Q l: is the user colour blind?
F key=accessibility: The user has deuteranopia (red-green colour blindness), so diffs and charts should not rely on red versus green alone.

Q p: when is she unavailable in the late afternoon?
Q l: which days does the user leave early to pick up her kids?
F key=calendar.pickup: On Tuesdays and Thursdays the user leaves at 17:15 to pick up her two kids from school.

Q p: what tongues can she converse in?
F key=languages: The user speaks Portuguese and English fluently and has been learning Japanese since 2022.

Q p: if she messages me in her native tongue, how should I answer?
Q l: should replies be in English when the user writes in Portuguese?
F key=style.language: The user wants replies in English even when she writes in Portuguese.

Q p: what computer does she develop on?
Q l: what laptop does the user work on?
F key=machine: The user works on a 14-inch MacBook Pro with an M2 Pro chip running macOS Sonoma.
D stale: The user's previous laptop was a ThinkPad X1 Carbon running Fedora, returned to IT in 2023.

Q p: which container engine does she rely on on her Mac?
Q x: colima instead of Docker Desktop
F key=docker: The user runs Docker through colima; Docker Desktop is not installed because of its licence.

Q p: may I pull in extra third-party packages without checking with her?
Q l: should I ask the user before adding a new dependency?
F key=rules.dependencies: The user wants to be asked before any new dependency is added to a project.

Q p: can I upload my commits to the remote on my own?
Q l: is git push allowed without explicit approval?
F key=rules.push: The user does not allow git push without explicit approval in the conversation.

Q p: is it fine to display credentials like passwords on screen?
Q l: can secrets and tokens be printed in full?
F key=rules.secrets: The user never wants secrets or tokens printed in full; show at most the last four characters.

Q p: what casing convention for queries in the relational language?
Q l: how does the user format SQL keywords?
F key=sql.style: The user writes SQL keywords in uppercase and puts each selected column on its own line.

Q p: which web client does she surf with?
Q l: which browser and extensions does the user use?
F key=browser: The user's browser is Firefox Developer Edition, with uBlock Origin and the React DevTools extension.

Q p: what does she jot ideas down in?
F key=notes: The user keeps personal notes in Obsidian, synced through a private Git repository.

Q p: what sport does she do on weekends?
Q l: where does the user go bouldering?
F: The user goes bouldering at a gym in Alcântara most Saturday mornings.

Q p: what was her earlier employer and which area did she cover there?
Q l: where did the user work before Fernhill Goods?
F: Before Fernhill Goods, the user spent four years (2016-2020) on the payments team at Banco Atlântico.

Q p: what did she study at university?
F: The user has a master's degree in computer science from Porto, finished in 2015.

Q p: which variety of English for prose in the manuals?
Q l: should documentation use British or American spelling?
F key=docs.spelling: The user wants British spelling in documentation (colour, behaviour, licence) but American spelling in code identifiers.

Q p: how should I write timestamps when talking to her?
Q x: ISO 8601 dates
F key=style.dates: The user prefers ISO 8601 dates (2024-05-17) and the 24-hour clock in all messages.

Q p: what should I use to sketch architecture visuals in markdown?
Q l: which diagram format does the user like?
F key=docs.diagrams: The user likes diagrams written in Mermaid so they render directly on GitHub.

Q p: what's her limit on how big a review can be?
Q l: how large should a pull request be for the user?
F key=git.pr_size: The user asks for pull requests under 400 changed lines; larger work should be split into stacked PRs.

Q p: how does she feel about me saying sorry a lot?
F: The user finds repeated apologies irritating; just acknowledge the mistake and fix it.

Q p: which input device and letter arrangement is on her desk?
Q x: Colemak
F key=keyboard: The user types on a split keyboard with the Colemak layout, so suggested shortcuts should be described by key name, not position.

Q p: what handset does she carry?
Q l: which Android phone does the user test builds on?
F key=phone: The user's phone is a Pixel 7 running Android 14, which she uses to try mobile-app builds.

Q p: which database does she favour for services?
Q l: what does the user think of MongoDB?
F: The user defaults to PostgreSQL for anything new and distrusts MongoDB after a data-loss incident at her previous job.

Q p: which datacenter location should cloud infrastructure default to?
Q x: eu-west-1 default for her AWS resources
F key=aws.region: The user's AWS resources live in eu-west-1 (Ireland) unless latency to Lisbon requires eu-south-2.

Q p: when is she physically at HQ?
Q l: which days does the user work from the office?
F key=office.days: The user works from the Lisbon office on Wednesdays and Thursdays and remotely the rest of the week.

Q x: @dokafor
Q x: dana.okafor@fernhill.example
F key=github: The user's GitHub handle is @dokafor and her work email is dana.okafor@fernhill.example.

Q p: when she critiques my changes, what is she looking for?
Q l: what does the user care about most in code review?
F: In code review the user cares most about naming and error handling, and rarely comments on style because ruff covers it.

Q p: at what size does a routine get too big for her taste?
Q l: how long can functions be before the user objects?
F: The user dislikes functions longer than about 50 lines and asks for them to be broken up.

Q p: which systems language is she picking up?
Q l: is the user learning Rust?
F: The user is learning Rust in her spare time and is working through "Zero To Production" on weekends.

Q p: does she eat meat?
F key=diet: The user is vegetarian; team lunch suggestions should account for that.

Q p: what palette and typeface are set in her console?
Q l: which terminal theme and font does the user use?
F key=terminal: The user's terminal uses the Gruvbox Dark theme with JetBrains Mono at 14 pt.

Q p: how does she prefer new concepts to be taught?
F: The user learns best from worked examples rather than abstract descriptions.

Q p: what's the fastest way to contact her during an emergency?
Q l: should urgent production issues go to Slack or a phone call?
F: For urgent production issues the user wants a phone call via PagerDuty; Slack DMs are for everything else.

Q l: which Python version does the user prefer for personal projects?
F: The user targets Python 3.12 for personal projects but accepts 3.11 at work.

Q p: what self-hosted box does she have at her flat?
Q x: kestrel
F: The user runs a Debian 12 home server (hostname kestrel) with Jellyfin and a Gitea instance.

Q p: how does she authenticate to remote machines without passwords in files?
Q x: 1Password SSH agent
F: The user's SSH keys live in the 1Password SSH agent; there are no private keys on disk.

Q p: what side project does she publish publicly?
Q x: pg-lockwatch
F: The user maintains a small open-source library, pg-lockwatch, for detecting long-held Postgres locks.

Q p: has she given any talks at events?
Q l: what did the user speak about at PyCon Portugal?
F: The user spoke at PyCon Portugal 2023 about idempotent payment retries.

Q p: how should a recap of a finished job be shaped?
Q l: how long should a summary be for the user?
F key=style.summaries: The user wants summaries as three bullet points at most, with the outcome first.
F slot=agent: Long end-of-task summaries got ignored twice; three bullets with the result first worked better for Dana.

Q p: what does she use to jump around folders in the terminal?
F key=shell.nav: The user relies on zoxide's z command instead of cd for moving between directories.

Q p: is she fine with me altering her personal settings files?
Q l: can the agent edit the user's dotfiles?
F key=rules.dotfiles: The user does not want the agent to edit anything under ~/.config or her dotfiles repository.

Q p: does she expect to see my reasoning before large rewrites begin?
Q l: should the agent propose a plan before a big refactor?
F key=style.plans: Before a big refactor the user wants a short numbered plan to approve first.

Q p: how does Dana feel about inline remarks sprinkled through source?
Q l: what does the user think about code comments?
F: The user prefers comments that explain why, and deletes comments that restate what the code does.

Q p: which chat tool is she reachable on for work?
F: The user is on Slack as @dana.o and keeps notifications off outside 09:30-18:00.

Q p: what's her stance on shortened identifiers?
Q l: does the user accept abbreviated variable names?
F: The user asks for full words in variable names; abbreviations like cfg, usr or tmp_val get flagged in review.

Q p: what is her preferred way to receive a large output, like a long table?
F: For results longer than a screen the user wants a file written to disk and a two-line summary in chat.

Q p: does she have pets?
F: The user has a grey cat called Miso who sometimes walks across the keyboard during calls.

Q p: what does she have in her cup during afternoon breaks?
F: The user drinks oat-milk flat whites and avoids caffeine after 16:00.
"""

BLOCKS += r"""
@ user -

Q l also=rules.push,rules.dependencies: what are the user's rules about git push and adding dependencies?
Q l also=python.packaging,python.format,python.typing: what are the user's Python tooling preferences for packaging, formatting and typing?
Q p also=git.commits,git.integration: what are her habits around version control history?
Q l also=office.days,calendar.pickup: which days is the user in the office, and when does she leave early?
Q l also=rules.push,rules.terraform: which actions need the user's explicit approval, like git push or terraform apply?
Q p also=style.answers,style.summaries: how wordy may my messages to her be?
"""
