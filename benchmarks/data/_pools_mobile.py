"""Hand-written material for generated mobile-app distractors (project and agent slots)."""

SCOPE = "mobile-app"
TICKET = "MOB"
TICKET_RANGE = (100, 990)
PR_RANGE = (100, 1500)

PEOPLE = [
    ("Sofia Marino", "mobile lead"),
    ("Jake Whitman", "Android engineer"),
    ("Noor Haddad", "iOS engineer"),
    ("Ravi Menon", "React Native engineer for the API client"),
    ("Chloe Dubois", "product designer for mobile"),
    ("Kenji Mori", "mobile QA engineer"),
]

PEOPLE_FACTS = [
    "Chloe Dubois owns the Figma library that the @fernhill/ui components mirror.",
    "Ravi Menon maintains the OpenAPI code generation script in scripts/generate-api.ts.",
    "Kenji Mori runs the manual regression pass on a device farm before each store submission.",
    "Jake Whitman is in the Dublin office and prefers async reviews over calls.",
    "Noor Haddad has the only Apple developer account with admin rights besides Sofia Marino.",
    "Sofia Marino decides which features go into each release during Monday planning.",
    "Kenji Mori keeps a spreadsheet of the 40 most used Android devices from Play Console data.",
    "Ravi Menon is on leave from 2 to 20 September 2024; Jake Whitman covers API client reviews.",
    "Chloe Dubois runs a design critique every Wednesday at 16:00 that engineers may join.",
    "Jake Whitman wrote the custom native module for barcode scanning in android/app/src/main/java/com/fernhill/scanner/.",
]

MODULES = [
    (
        "app/screens/CheckoutScreen.tsx",
        "shows the order summary and launches the payment sheet",
    ),
    (
        "app/screens/ProductScreen.tsx",
        "renders product detail with the variant picker and gallery",
    ),
    (
        "app/screens/CartScreen.tsx",
        "lists cart lines and lets customers change quantities",
    ),
    (
        "app/screens/OrdersScreen.tsx",
        "lists past orders and links to shipment tracking",
    ),
    ("app/screens/SearchScreen.tsx", "handles search input with debounced suggestions"),
    ("app/screens/AccountScreen.tsx", "shows profile, addresses and loyalty points"),
    (
        "app/screens/ScannerScreen.tsx",
        "scans in-store barcodes to open the matching product",
    ),
    (
        "app/components/PriceTag.tsx",
        "formats prices with the device locale and shows sale prices crossed out",
    ),
    (
        "app/components/ProductCard.tsx",
        "renders a product tile used in lists and carousels",
    ),
    ("app/components/Countdown.tsx", "shows the remaining time of a flash sale"),
    (
        "app/api/client.ts",
        "wraps the generated API client with auth headers and retries",
    ),
    (
        "app/api/auth.ts",
        "refreshes tokens before they expire and queues requests meanwhile",
    ),
    ("app/state/cartStore.ts", "holds the cart and syncs it with the server on focus"),
    ("app/state/sessionStore.ts", "keeps the logged-in user and token metadata"),
    (
        "app/hooks/useProduct.ts",
        "fetches a product with TanStack Query and prefetches related items",
    ),
    ("app/analytics/track.ts", "sends Segment events and attaches the screen name"),
    (
        "app/notifications/register.ts",
        "asks for push permission and registers the device token",
    ),
    (
        "app/utils/formatDate.ts",
        "formats dates for order history using the device locale",
    ),
    (
        "ios/FernhillNotificationService/NotificationService.swift",
        "downloads images for rich push notifications",
    ),
    ("android/app/build.gradle", "defines build flavors for production and beta"),
    (
        "android/app/src/main/AndroidManifest.xml",
        "declares permissions and the universal link intent filters",
    ),
    (
        "fastlane/Fastfile",
        "defines the lanes for beta and store uploads on both platforms",
    ),
    (
        "scripts/generate-api.ts",
        "generates the TypeScript API client from shop-api's OpenAPI file",
    ),
    ("e2e/helpers/login.ts", "logs a test user in for Detox scenarios"),
]

# (file suffixes it applies to, reason)
REFACTOR_REASONS = [
    (".tsx", "move from class components to hooks"),
    ((".ts", ".tsx"), "replace moment.js with date-fns"),
    (".ts", "use the generated API types instead of hand-written ones"),
    (".tsx", "split a 900-line screen into smaller components"),
    ((".ts", ".tsx"), "remove the last Redux connect() calls"),
    (".tsx", "support right-to-left layouts"),
]

PROBLEMS = [
    (
        "the app crashes on Android 8 when opening the product gallery",
        "downscaling large images before decoding",
    ),
    (
        "prices show a comma and a dot together for Spanish users",
        "formatting with Intl.NumberFormat and the device locale",
    ),
    (
        "the cart badge count is stale after checkout",
        "invalidating the cart query on order success",
    ),
    (
        "push notifications do not open the order screen when the app is killed",
        "handling the initial notification on launch",
    ),
    (
        "the barcode scanner freezes after granting camera permission",
        "restarting the camera session after permission changes",
    ),
    (
        "dark mode makes sale prices unreadable on the product card",
        "using the theme's sale colour token",
    ),
    (
        "logging out leaves the previous user's addresses in memory",
        "resetting all stores on logout",
    ),
    (
        "the search screen sends a request on every keystroke",
        "debouncing input by 300 ms",
    ),
    (
        "Apple Pay button is missing on iPads",
        "checking canMakePayments on every device type",
    ),
    (
        "deep links to a product open the home screen first",
        "waiting for navigation to be ready before routing",
    ),
    (
        "the checkout screen jumps when the keyboard opens on Android",
        "setting windowSoftInputMode to adjustResize",
    ),
    (
        "token refresh fails when two requests expire at the same moment",
        "sharing one refresh promise between requests",
    ),
    (
        "the order history shows dates one day off in Brazil",
        "parsing dates as UTC before formatting",
    ),
    (
        "VoiceOver reads the price twice on product cards",
        "hiding the decorative text from accessibility",
    ),
    (
        "images flicker when scrolling fast on low-end Android phones",
        "setting a fixed size on the image placeholders",
    ),
    (
        "the app asks for notification permission on first launch",
        "moving the prompt after the first order",
    ),
    (
        "the loyalty points screen shows NaN for new customers",
        "defaulting the balance to zero",
    ),
    (
        "Segment events are lost when the app goes to background",
        "flushing the queue on app state change",
    ),
    (
        "the Android back button exits the app from the checkout flow",
        "handling hardware back in the checkout stack",
    ),
    (
        "the flash sale countdown drifts by minutes",
        "computing the remaining time from server time",
    ),
    (
        "universal links stopped working after the domain move",
        "updating the apple-app-site-association file",
    ),
    (
        "the app size grew by 20 MB after adding the scanner",
        "enabling ABI splits on Android",
    ),
    (
        "the address form accepts invalid Portuguese postcodes",
        "validating the NNNN-NNN format with zod",
    ),
    ("crash on iOS 15 when sharing a product", "using the native share sheet fallback"),
    ("guest checkout loses the cart after app restart", "persisting the guest cart id"),
    (
        "the review prompt appears during checkout",
        "showing it only on the order confirmation screen",
    ),
]

STATUSES = [
    "open",
    "in progress",
    "in review",
    "blocked on the React Native upgrade",
    "needs a reproduction",
    "planned for 24.9",
    "waiting for design",
]

DEPS = [
    (
        "react-native",
        "0.73.6",
        "0.74 needs the new architecture for two of our native modules",
    ),
    ("react-native-reanimated", "3.6.2", "3.7 crashes with Hermes on Android 8"),
    (
        "@tanstack/react-query",
        "5.28.4",
        "it is the version the API client was generated against",
    ),
    ("zustand", "4.5.2", "the persist middleware API changed in 5"),
    ("react-native-mmkv", "2.11.0", "3.x requires the new architecture"),
    ("@stripe/stripe-react-native", "0.37.2", "newer versions need iOS 16"),
    (
        "react-native-fast-image",
        "8.6.3",
        "the library is unmaintained and pinned until we replace it",
    ),
    ("@sentry/react-native", "5.19.1", "source map uploads changed in 5.20"),
    ("detox", "20.18.1", "it is the last version that supports our Jest 29 setup"),
    ("react-navigation", "6.1.17", "version 7 changes the linking config format"),
    ("date-fns", "3.3.1", "it replaced moment.js and v4 is not needed yet"),
    (
        "zod",
        "3.22.4",
        "the form schemas are shared with the web storefront at this version",
    ),
]

ENV = [
    (
        "API_BASE_URL",
        "which shop-api host the build talks to",
        "set per build flavor in .env.production and .env.beta",
    ),
    ("SENTRY_ORG", "the Sentry organisation for source map uploads", "fernhill"),
    (
        "SEGMENT_WRITE_KEY",
        "the analytics write key",
        "a dummy value in development builds",
    ),
    (
        "UNLEASH_PROXY_URL",
        "the feature flag proxy used by the app",
        "https://flags-proxy.fernhill.example/proxy",
    ),
    ("CODEPUSH_KEY_IOS", "the CodePush deployment key for iOS", "empty in beta builds"),
    (
        "MATCH_GIT_URL",
        "the repository fastlane match reads certificates from",
        "git@github.com:fernhill/ios-certificates.git",
    ),
    (
        "GOOGLE_PLAY_JSON_KEY",
        "the service account file used by fastlane supply",
        "read from the CI secret store",
    ),
    ("E2E_TEST_USER", "the account Detox logs in with", "detox+1@fernhill.example"),
    (
        "ANDROID_VERSION_CODE_OFFSET",
        "the offset added to version codes for beta builds",
        "100000",
    ),
    (
        "MAPS_API_KEY",
        "the key for the store locator map",
        "restricted to the app's package name",
    ),
]

INCIDENTS = [
    (
        "2024-02-02",
        "the iOS app crashed on launch for users on iOS 15",
        "a dependency using an iOS 16 API without a check",
        "CI runs the smoke test on an iOS 15 simulator",
    ),
    (
        "2023-11-24",
        "Android checkout failed for 2 hours on Black Friday",
        "an expired Google Pay merchant configuration",
        "payment configuration expiry dates are in the shared calendar",
    ),
    (
        "2024-04-17",
        "push notifications went to the wrong language",
        "the device locale being read before i18n initialised",
        "registration waits for i18n to be ready",
    ),
    (
        "2023-12-11",
        "the Play Store listing was rejected",
        "missing data safety declarations for the scanner",
        "Kenji reviews store listings before every submission",
    ),
    (
        "2024-03-12",
        "a CodePush update broke the cart for 3% of users",
        "an update built against a newer native binary",
        "CodePush releases target an explicit binary version range",
    ),
    (
        "2024-05-27",
        "beta testers lost their carts",
        "an MMKV encryption key change without migration",
        "storage migrations are tested in a dedicated Jest suite",
    ),
]

CONVENTIONS = [
    "Screens live in app/screens/ and end with Screen, like CheckoutScreen.tsx.",
    "API calls go through the generated client in app/api/, built from shop-api's OpenAPI spec.",
    "Data fetching uses TanStack Query with a 60 second stale time for catalog data.",
    "Images must be added in 1x, 2x and 3x variants under assets/images/.",
    "Strings are never hard-coded in components; use the t() helper from app/i18n.",
    "Android uses edge-to-edge layouts, so every screen wraps its content in SafeAreaView.",
    "Forms use react-hook-form with zod schemas shared in app/validation/.",
    "Animations use Reanimated 3; the legacy Animated API is banned by a lint rule.",
    "Every PR runs Jest unit tests and TypeScript checks in GitHub Actions, which take about 6 minutes.",
    "Refresh tokens are stored in the Keychain or Keystore through react-native-keychain.",
    "Analytics event names use Title Case with a past-tense verb, like Product Added.",
    "Release branches are named release/24.7 and only accept cherry-picked fixes.",
    "Crash reports include the last 50 navigation breadcrumbs.",
    "Android builds target SDK 34 and compile with Java 17.",
    "Tablet layouts are not supported; the app is locked to portrait on phones.",
    "Guest checkout sits behind the mob_guest_checkout flag.",
    "Remote config values are fetched once at startup and cached for 12 hours.",
    "Jest snapshot tests were removed in 2023 because people updated them blindly.",
    "Performance budget: cold start under 2 seconds on a Pixel 6a.",
    "Fonts are Inter for body text and Fraunces for headings, bundled in assets/fonts/.",
    "Biometric login uses react-native-biometrics and falls back to the device passcode.",
    "The app has about 210,000 monthly active users, 64% of them on Android.",
    "Store screenshots are generated with fastlane snapshot in four languages.",
    "Every native module needs a TypeScript declaration in app/native/ and a Jest mock.",
    "Feature work goes into main behind a flag; long-lived feature branches are discouraged.",
]

ADRS = [
    "ADR-M02: we stay on React Native rather than Flutter because the team already knows TypeScript.",
    "ADR-M04: navigation state is not persisted across restarts, except for the cart tab.",
    "ADR-M06: server state lives in TanStack Query and only client state goes into Zustand.",
    "ADR-M07: the app never stores card data; payments always go through the Stripe SDK.",
    "ADR-M09: we adopt the new architecture only after all native modules support it.",
    "ADR-M10: the design system is shared as an npm package rather than copied into the repo.",
]

SCREENS = [
    ("Home", "a personalised feed of collections and recently viewed products"),
    ("Product", "product detail with variant picker, gallery and delivery estimate"),
    ("Cart", "cart lines with quantity steppers and a coupon field"),
    ("Checkout", "address, delivery option and the Stripe payment sheet"),
    (
        "OrderConfirmation",
        "the order number, an estimated delivery date and a review prompt",
    ),
    ("Orders", "past orders with status chips"),
    ("OrderDetail", "line items, tracking link and the return button"),
    ("Search", "a search field with recent searches and suggestions"),
    ("Account", "profile, saved addresses, loyalty balance and settings"),
    ("StoreLocator", "a map of the four physical stores with opening hours"),
    ("Scanner", "the in-store barcode scanner"),
    ("Wishlist", "saved products that sync with the web storefront"),
]

AGENT_NOTES = [
    '`yarn ios` picks the last used simulator; pass --simulator "iPhone 14" to be explicit.',
    "The generated API client must be regenerated with `yarn api:generate` after shop-api changes its OpenAPI file.",
    "TypeScript checks take about 90 seconds; run `yarn tsc --noEmit` before pushing to save a CI round.",
    "Sofia wants every user-facing change to mention the flag it sits behind in the PR description.",
    "Android release builds locally need the upload keystore; debug builds work without it.",
    "Detox needs the app built with `yarn detox build -c ios.sim.release` before the tests, or it runs a stale binary.",
    "After a React Native upgrade, delete ios/Pods and android/.gradle or the build picks up old artifacts.",
    "Jake reviews anything touching android/ and asks for the version code bump to be in a separate commit.",
    "Metro on port 8081 conflicts with the local shop-api docs server; start it with --port 8088 if both run.",
    "Sentry source maps only upload from CI; local release builds show minified stack traces.",
    "The iOS simulator's location is Cupertino by default; set it to Lisbon to test the store locator.",
    "`adb reverse tcp:8081 tcp:8081` is needed on physical Android devices connected over USB.",
    "Chloe expects spacing values from the theme scale; arbitrary padding numbers get flagged in review.",
]

FLAKY_TESTS = [
    ("search_suggestions.e2e.ts", "e2e/search_suggestions.e2e.ts"),
    ("login_biometric.e2e.ts", "e2e/login_biometric.e2e.ts"),
    ("wishlist_sync.e2e.ts", "e2e/wishlist_sync.e2e.ts"),
    ("order_tracking.e2e.ts", "e2e/order_tracking.e2e.ts"),
    ("CartScreen.test.tsx", "app/screens/__tests__/CartScreen.test.tsx"),
    ("PriceTag.test.tsx", "app/components/__tests__/PriceTag.test.tsx"),
    ("auth.test.ts", "app/api/__tests__/auth.test.ts"),
    ("cartStore.test.ts", "app/state/__tests__/cartStore.test.ts"),
    ("scanner_permissions.e2e.ts", "e2e/scanner_permissions.e2e.ts"),
    ("formatDate.test.ts", "app/utils/__tests__/formatDate.test.ts"),
]

ERRORS = [
    (
        'error: Signing for "Fernhill" requires a development team',
        "on a fresh clone of the iOS project",
        "run `bundle exec fastlane match development` to install profiles",
    ),
    (
        "Execution failed for task ':app:mergeDebugResources'",
        "after adding an image with a dash in its name",
        "rename Android resources to lowercase with underscores",
    ),
    (
        'Invariant Violation: "main" has not been registered',
        "when Metro serves a bundle from another project",
        "kill the old Metro process and restart with --reset-cache",
    ),
    (
        "Unable to resolve module @fernhill/ui",
        "when the GitHub Packages token is missing",
        "set NPM_TOKEN in ~/.npmrc",
    ),
    (
        'CocoaPods could not find compatible versions for pod "hermes-engine"',
        "after switching React Native versions",
        "run `pod repo update` and `pod install` again",
    ),
    (
        "SDK location not found. Define a valid SDK location with an ANDROID_HOME environment variable",
        "on a new machine",
        "set ANDROID_HOME to ~/Library/Android/sdk",
    ),
    (
        "Detox: Failed to run application on the device",
        "when the simulator name in .detoxrc.js does not exist",
        "create the simulator or change the device type",
    ),
    (
        "TypeError: Cannot read property 'getConstants' of null",
        "in Jest tests that import a native module",
        "add the mock from app/native/__mocks__",
    ),
]

# --- more material ---------------------------------------------------------

MODULES += [
    (
        "app/screens/WishlistScreen.tsx",
        "shows saved products and syncs them with the web storefront",
    ),
    (
        "app/screens/StoreLocatorScreen.tsx",
        "shows the physical stores on a map with opening hours",
    ),
    (
        "app/screens/OrderDetailScreen.tsx",
        "shows line items, tracking and the return button",
    ),
    (
        "app/components/VariantPicker.tsx",
        "lets customers pick size and colour and disables sold-out combinations",
    ),
    ("app/components/AddressForm.tsx", "collects and validates delivery addresses"),
    (
        "app/components/ReviewPrompt.tsx",
        "asks for a store rating after a delivered order",
    ),
    ("app/state/wishlistStore.ts", "keeps wishlist ids and merges them after login"),
    ("app/native/Scanner.ts", "wraps the barcode scanner native module"),
    ("app/i18n/index.ts", "loads translation bundles and exposes the t() helper"),
    (
        "android/app/src/main/java/com/fernhill/scanner/ScannerModule.kt",
        "implements barcode scanning with ML Kit",
    ),
]

FUNCTIONS = [
    (
        "app/api/auth.ts",
        "refreshTokens()",
        "shares one in-flight refresh between concurrent requests",
    ),
    (
        "app/state/cartStore.ts",
        "syncCart()",
        "pushes local cart changes and pulls server prices",
    ),
    (
        "app/analytics/track.ts",
        "trackEvent()",
        "adds the app version and screen name before sending to Segment",
    ),
    (
        "app/utils/formatDate.ts",
        "formatOrderDate()",
        "formats dates like 12 Mar 2024 in the device locale",
    ),
    (
        "app/hooks/useProduct.ts",
        "useProduct()",
        "returns product data and prefetches the first related products",
    ),
    (
        "app/notifications/register.ts",
        "registerForPush()",
        "requests permission and sends the FCM token to shop-api",
    ),
    (
        "app/components/PriceTag.tsx",
        "PriceTag",
        "takes amounts in cents and never does float arithmetic",
    ),
    (
        "app/native/Scanner.ts",
        "startScan()",
        "resolves with the first barcode found or rejects after 30 seconds",
    ),
    (
        "app/components/AddressForm.tsx",
        "validatePostcode()",
        "checks the NNNN-NNN format for Portugal",
    ),
    (
        "app/state/wishlistStore.ts",
        "mergeWishlist()",
        "unions guest and account wishlists after login",
    ),
    ("app/i18n/index.ts", "t()", "falls back to English when a key is missing"),
]

FEATURES = [
    ("guest checkout in the app", "behind mob_guest_checkout for 20% of users"),
    ("the barcode scanner", "live in all four stores"),
    ("wishlist sync with the web", "live since 24.4"),
    ("the new architecture (Fabric)", "blocked by two native modules"),
    ("home screen widgets", "in design with Chloe"),
    ("Apple Pay express checkout", "live on iOS only"),
    ("Google Pay", "live since 24.2"),
    ("order tracking push notifications", "in beta"),
    ("dark mode", "live since 24.1"),
    ("in-app returns", "in development for 24.9"),
    ("replacing CodePush", "being evaluated, with Expo Updates as a candidate"),
]

PROBLEMS += [
    (
        "the variant picker lets customers select sold-out sizes",
        "disabling options with zero stock",
    ),
    ("the wishlist merge duplicates items after login", "deduplicating by product id"),
    (
        "the store locator shows closed stores as open on holidays",
        "reading holiday hours from the API",
    ),
    (
        "the review prompt appears twice after one order",
        "storing the prompt date in MMKV",
    ),
    (
        "the scanner reads EAN-8 codes as UPC-E",
        "restricting formats to EAN-13 and EAN-8",
    ),
    (
        "the address form rejects postcodes with spaces",
        "trimming input before validation",
    ),
    (
        "Google Pay shows the wrong merchant name",
        "setting merchantName in the payment sheet config",
    ),
    ("the app crashes when a product has no images", "rendering a placeholder"),
    (
        "the language switch needs an app restart",
        "reloading translation bundles at runtime",
    ),
    (
        "order tracking pushes arrive after the parcel is delivered",
        "dropping stale tracking events",
    ),
]

EXTRA = [
    "About 8% of mobile orders use Apple Pay and 11% use Google Pay.",
    "The App Store rating is 4.6 and the Play Store rating is 4.3 as of June 2024.",
    "The app bundle is about 38 MB on iOS and 29 MB on Android.",
    "Crash reports spike for about a day after every release while old binaries update.",
    "Customer support needs the app version and device model for every bug report.",
    "The app shows prices with VAT included, as required in Portugal.",
    "The four physical stores are in Lisbon, Porto, Braga and Faro.",
    "Product detail is the most visited screen, followed by Home and Search.",
    "The mobile team runs a bug bash before every store release.",
    "60% of Android users are on Android 13 or newer.",
    "Push notification opt-in is about 54% on iOS and 78% on Android.",
]

SCREENS += [
    ("ReturnRequest", "the return reason picker and the label download"),
    ("Settings", "language, notification and privacy preferences"),
    ("Onboarding", "three intro slides and the sign-in options"),
    ("FlashSale", "a countdown and the sale products"),
]

AGENT_NOTES += [
    "ML Kit barcode scanning does not work on the iOS simulator; test the scanner on a device.",
    "`yarn android` fails if an emulator and a physical device are both connected; pass --deviceId.",
    "Kenji wants reproduction steps with app version and device in every bug fix PR.",
    "Running Detox locally needs the Metro server on port 8081 already started in another terminal.",
    "The Jest setup mocks MMKV globally; tests that need real storage must unmock it explicitly.",
    "fastlane match runs in readonly mode on CI; new certificates can only be created by Noor or Sofia.",
    "Storybook runs with `yarn storybook` and is the quickest way to check a component in isolation.",
    "Changing anything in ios/ requires `pod install`, which takes about 4 minutes on mob-ci-01.",
]

FLAKY_TESTS += [
    ("flash_sale_countdown.e2e.ts", "e2e/flash_sale_countdown.e2e.ts"),
    ("VariantPicker.test.tsx", "app/components/__tests__/VariantPicker.test.tsx"),
    ("wishlistStore.test.ts", "app/state/__tests__/wishlistStore.test.ts"),
    ("store_locator.e2e.ts", "e2e/store_locator.e2e.ts"),
]

ERRORS += [
    (
        "Could not resolve com.google.mlkit:barcode-scanning",
        "when the Google Maven repository is missing from build.gradle",
        "add google() to the repositories block",
    ),
    (
        "ReferenceError: Property 'Intl' doesn't exist",
        "in Jest tests that format prices",
        "import the Intl polyfills in jest.setup.js",
    ),
    (
        "xcodebuild: error: Unable to find a destination matching the provided destination specifier",
        "after the CI simulator was renamed",
        "list simulators with `xcrun simctl list` and update the Fastfile",
    ),
]

HANDLES = {
    "Sofia Marino": "sofiamarino",
    "Jake Whitman": "jwhitman",
    "Noor Haddad": "noorh-ios",
    "Ravi Menon": "ravimenon",
    "Chloe Dubois": "chloe-designs",
    "Kenji Mori": "kmori-qa",
}

OLD_PINS = [
    ("react-native", "0.71.8"),
    ("react-native-reanimated", "2.17.0"),
    ("@tanstack/react-query", "4.29.5"),
    ("detox", "19.13.0"),
    ("@sentry/react-native", "4.15.1"),
]

RETRO = [
    "freeze strings two days before a store release so translations can catch up",
    "test every release candidate on the oldest supported Android device",
    "keep CodePush updates to JavaScript-only bug fixes",
    "have design review screenshots before merge, not after",
    "run the Detox suite on release branches as well as nightly",
    "split native upgrades from feature work",
]

COMMANDS = [
    ("yarn test", "about 2 minutes"),
    ("yarn tsc --noEmit", "about 90 seconds"),
    ("yarn detox test -c ios.sim.release", "about 40 minutes"),
    ("cd ios && pod install", "about 4 minutes"),
    ("./gradlew assembleRelease", "about 7 minutes on mob-ci-01"),
]

CHANNELS = [
    ("#mobile-dev", "day-to-day questions about the app"),
    ("#mobile-releases", "store submissions and release notes"),
    ("#mobile-crashes", "Sentry crash alerts for both platforms"),
    ("#design-mobile", "design reviews with Chloe"),
]

INCIDENTS += [
    (
        "2024-01-22",
        "Android users could not log in for 50 minutes",
        "a certificate pinning update shipped before the server certificate changed",
        "certificate pinning was removed in favour of standard TLS validation",
    ),
    (
        "2023-10-09",
        "the store locator map was blank",
        "the Maps API key restrictions excluding the beta package name",
        "the key allows both package names",
    ),
]

GLOSSARY = [
    "In mobile-app, a build flavor is an Android variant; there are production and beta flavors.",
    "A binary release is a store submission, as opposed to a JavaScript-only CodePush update.",
    "The payment sheet is Stripe's prebuilt checkout UI for card, Apple Pay and Google Pay.",
    "Design tokens are the named colours, spacings and font sizes exported from Figma.",
    "The device farm is the set of 12 physical phones Kenji keeps for manual testing.",
    "A release candidate is the build submitted to both stores after the bug bash.",
    "Breadcrumbs are the navigation and network events attached to Sentry crash reports.",
]
