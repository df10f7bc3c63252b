-- tide.optim, tide.optim.lr_scheduler and tide.nn.utils.clip_grad_*: parameter
-- trajectories, lr sequences and clipped gradients against PyTorch 1.13 values
-- computed offline (REF below: torch.optim on float64, loss = sum(w^2 c) + sum(v^3)/4).
local tide = require "tide"
local H = require "helper"
local clip = require "tide.nn.utils"

local REF = {
  optimizers = {
    { name = 'SGD', opts = { lr = 0.1 },
      traj = {
        { { 0.9, -2.6, 0.3 }, { 0.29325, -0.7367499999999999, 1.0919999999999999, 0.388 } },
        { { 0.81, -3.3800000000000003, 0.18 }, { 0.2868003328125, -0.7774600421874999, 1.0025651999999998, 0.3767092 } },
        { { 0.7290000000000001, -4.394, 0.108 }, { 0.28063125049489795, -0.8227933509773641, 0.9271799264811719, 0.366065963397652 } },
        { { 0.6561000000000001, -5.7122, 0.0648 }, { 0.27472470808832317, -0.873567518358306, 0.8627052302759495, 0.3560156416807832 } },
        { { 0.5904900000000001, -7.42586, 0.03888 }, { 0.2690641831957571, -0.9308015340431077, 0.8068857067000386, 0.3465096063966797 } } } },
    { name = 'SGD', opts = { lr = 0.1, momentum = 0.9, nesterov = true },
      traj = {
        { { 0.81, -3.14, 0.12 }, { 0.287175, -0.769825, 0.9947999999999999, 0.37720000000000004 } },
        { { 0.5751000000000001, -5.4158, -0.13320000000000007 }, { 0.2699555990109375, -0.8840423506140624, 0.7662981468, 0.34720512280000004 } },
        { { 0.32732100000000003, -9.703226, -0.21664800000000006 }, { 0.2496399944381458, -1.0582035554188225, 0.5437684730250512, 0.3126350484049548 } },
        { { 0.09388790999999998, -17.63048222, -0.17505072000000002 }, { 0.22739446396736612, -1.3217660594696559, 0.34099364229188306, 0.2757311547945756 } },
        { { -0.10458168390000007, -32.1945166634, -0.08256790079999998 }, { 0.20421167058459383, -1.7323430025232325, 0.1618855502774149, 0.23828120307016828 } } } },
    { name = 'SGD', opts = { lr = 0.05, momentum = 0.9, dampening = 0.1, weight_decay = 0.01 },
      traj = {
        { { 0.9495, -2.299, 0.39975 }, { 0.296475, -0.7180249999999999, 1.1454, 0.39380000000000004 } },
        { { 0.860895225, -2.87743045, 0.23739011249999997 }, { 0.2902025481351562, -0.7513245353960937, 1.05146655585, 0.38280889265 } },
        { { 0.74202323952375, -3.7851761220475, 0.04842916794937496 }, { 0.28158440904577137, -0.8000075100268751, 0.9291399064299692, 0.36779881765345523 } },
        { { 0.6013134963587706, -5.111442674111741, -0.13037472550265225 }, { 0.2710253408259085, -0.8650625893584211, 0.7894914014009746, 0.34955867669210017 } },
        { { 0.447345029100783, -6.9928271827712924, -0.26777211039252313 }, { 0.25892112070592954, -0.9484791309099792, 0.642416213034344, 0.32886129311215695 } } } },
    { name = 'SGD', opts = { lr = 0.1, momentum = 0.5, maximize = true },
      traj = {
        { { 1.1, -1.4, 0.7 }, { 0.30674999999999997, -0.66325, 1.308, 0.41200000000000003 } },
        { { 1.26, -0.6799999999999999, 1.0799999999999998 }, { 0.3171821671875, -0.6118824578125001, 1.4903148000000002, 0.4307308 } },
        { { 1.466, -0.11599999999999994, 1.7019999999999997 }, { 0.3299435903198819, -0.5581186760553501, 1.7480500652324282, 0.45401087665514805 } },
        { { 1.7156, 0.20080000000000006, 2.6937999999999995 }, { 0.3444890098455609, -0.507874550934642, 2.1060936251405744, 0.48111035569181027 } },
        { { 2.01196, 0.29896000000000006, 4.267219999999999 }, { 0.36066217045122856, -0.463407246412758, 2.61778768193398, 0.5120201332866838 } } } },
    { name = 'Adam', opts = { lr = 0.1 },
      traj = {
        { { 0.900000001, -2.0999999998333334, 0.4000000005 }, { 0.2000000148148126, -0.7999999972789116, 1.1000000009259259, 0.3000000083333326 } },
        { { 0.8004122297123382, -2.2000973796971897, 0.30118742062343007 }, { 0.10853950209558776, -0.8998164907986389, 1.000825351390319, 0.20511039450185725 } },
        { { 0.701586274504415, -2.300352395546771, 0.20487125097072384 }, { 0.03074756951228208, -0.9995220454176461, 0.9031261217552892, 0.11933526060014381 } },
        { { 0.603939062682108, -2.400821834288064, 0.11291539606512863 }, { -0.03352658610518652, -1.0992535408431339, 0.8076017851750369, 0.044886516827405076 } },
        { { 0.507963661927221, -2.5015590641918024, 0.02781444879054204 }, { -0.08846866229829192, -1.1991724645923083, 0.7149672802730144, -0.018618987894877106 } } } },
    { name = 'Adam', opts = { lr = 0.05, betas = { 0.8, 0.99 }, weight_decay = 0.1, amsgrad = true },
      traj = {
        { { 0.9500000004545455, -2.0499999999137932, 0.4500000002439024 }, { 0.2500000051282046, -0.7499999983193277, 1.1500000004166666, 0.3500000031249998 } },
        { { 0.900152413686152, -2.1000616665630423, 0.40034800512143487 }, { 0.20135748336158454, -0.8002590692760722, 1.1002547024071168, 0.3009391900203767 } },
        { { 0.8505682199822042, -2.1502235496349895, 0.3513281019457856 }, { 0.15517251373665436, -0.8509327909557506, 1.0509437757014126, 0.25355521788131646 } },
        { { 0.8013644440244134, -2.200521911420787, 0.3032660934174586 }, { 0.11252021891290867, -0.9021610783622209, 1.0022499784713512, 0.20860050027087473 } },
        { { 0.7526631988235508, -2.250990492740058, 0.25652964172451703 }, { 0.07426918951299064, -0.9540672887750231, 0.9543552600229334, 0.16676438950093989 } } } },
    { name = 'Adam', opts = { lr = 0.05, maximize = true, eps = 0.001 },
      traj = {
        { { 1.04995004995005, -1.950008331944676, 0.5499750124937531 }, { 0.34927007299270074, -0.6501356852103121, 1.2499537465309898, 0.44958677685950416 } },
        { { 1.0999499405052136, -1.9000537529541213, 0.6000185924210555 }, { 0.39848718064465144, -0.600607259730556, 1.2999740307733736, 0.49919024550783514 } },
        { { 1.1500297052991266, -1.8501621851308265, 0.6501734802720689 }, { 0.4476686878145438, -0.5516664945779237, 1.3501022472312567, 0.548838941612095 } },
        { { 1.2002176522972021, -1.8003604562901483, 0.7004799168698654 }, { 0.49688121682021774, -0.5035833506265716, 1.4003783253352562, 0.5985836833329611 } },
        { { 1.2505403884051554, -1.7506762603852695, 0.7509752985480529 }, { 0.5462096848026704, -0.45663690412222185, 1.4508405712703702, 0.6484856972234652 } } } },
    { name = 'AdamW', opts = { lr = 0.1 },
      traj = {
        { { 0.899000001, -2.097999999833333, 0.3995000005 }, { 0.1997000148148126, -0.7992999972789115, 1.0988000009259258, 0.29960000833333267 } },
        { { 0.7985190281887788, -2.195998048682062, 0.30029783822405925 }, { 0.10808525517027173, -0.8983239080988993, 0.9985414884829968, 0.20444731215641013 } },
        { { 0.6989111847156934, -2.2940535352288687, 0.20371238138538522 }, { 0.03027122957285351, -0.9971454359841011, 0.8998849149241828, 0.11855349207886327 } },
        { { 0.6005985762659103, -2.392222340743478, 0.11162008915849915 }, { -0.03394620804075019, -1.0959012119716935, 0.8035392118394411, 0.04410439729095836 } },
        { { 0.5040800927472017, -2.4905568970966083, 0.026528199279084633 }, { -0.08879661653141313, -1.1947517490645616, 0.710226380938668, -0.019325973687705923 } } } },
    { name = 'AdamW', opts = { lr = 0.1, weight_decay = 0.1, amsgrad = true },
      traj = {
        { { 0.890000001, -2.0799999998333334, 0.3950000005 }, { 0.1970000148148126, -0.7929999972789116, 1.0880000009259259, 0.2960000083333326 } },
        { { 0.781571856954161, -2.1592829798643605, 0.29233870322270744 }, { 0.10402801756047571, -0.884950816482753, 0.9781003848610531, 0.19852099151527877 } },
        { { 0.6751012231892006, -2.237907075029039, 0.19341560270340274 }, { 0.026051417033651936, -0.9759436960053277, 0.8710465184847552, 0.1116213958183278 } },
        { { 0.5710475992066121, -2.315926658805562, 0.10021053731081034 }, { -0.0375994642839303, -1.0661206046412635, 0.7676205813043498, 0.037227174652771755 } },
        { { 0.4699526596188067, -2.3933924617248077, 0.015330356887991475 }, { -0.09155876570605175, -1.1556409295655587, 0.6685915144849965, -0.025455458595262527 } } } },
    { name = 'RMSprop', opts = { lr = 0.01 },
      traj = {
        { { 0.9000000099999991, -2.0999999983333333, 0.40000000499999977 }, { 0.2000001481479287, -0.7999999727891229, 1.1000000092592583, 0.30000008333326394 } },
        { { 0.8329179752650593, -2.172586616100887, 0.3373391709792283 }, { 0.15921566387733566, -0.8795476354078912, 1.0354789658109675, 0.2507866948758284 } },
        { { 0.7799822819823541, -2.232828424219579, 0.2904332182895075 }, { 0.13407316830371976, -0.9490392418631182, 0.985656597006386, 0.21811848083106966 } },
        { { 0.7353890542033931, -2.2856597647828103, 0.25282552062441743 }, { 0.11643552820895255, -1.0121283245839183, 0.9443395927512775, 0.19401464059161913 } },
        { { 0.696465799281033, -2.333415178559785, 0.2215709911085929 }, { 0.10318408548669537, -1.0706214346450809, 0.9087224716227525, 0.1751903601295918 } } } },
    { name = 'RMSprop', opts = { lr = 0.01, alpha = 0.9, centered = true, momentum = 0.9, weight_decay = 0.1 },
      traj = {
        { { 0.9666666676767677, -2.0333333331417625, 0.46666666720867206 }, { 0.26666667806267413, -0.7333333295985065, 1.1666666675925925, 0.36666667361110966 } },
        { { 0.9115901450389591, -2.0890223827730656, 0.4120283630561636 }, { 0.21370776146001963, -0.7900275029875266, 1.1118335947244817, 0.3130932621393426 } },
        { { 0.8405964724094608, -2.162132242568203, 0.3426341426706643 }, { 0.15017531952499233, -0.8664262953594446, 1.04166944507057, 0.24738407003332533 } },
        { { 0.757585794886207, -2.2498177733815683, 0.2633975993659633 }, { 0.08344247502751512, -0.9608652470591857, 0.9604474971460479, 0.17602536037254674 } },
        { { 0.6655627958730103, -2.350280179012073, 0.17870687355179457 }, { 0.01911740127898562, -1.0724097807754005, 0.8715349516446158, 0.1043549766448106 } } } },
    { name = 'RMSprop', opts = { lr = 0.01, momentum = 0.5, maximize = true },
      traj = {
        { { 1.099999990000001, -1.9000000016666667, 0.5999999950000002 }, { 0.39999985185207126, -0.600000027210877, 1.2999999907407416, 0.4999999166667361 } },
        { { 1.2241619645675685, -1.7809433287073901, 0.7269800256614627 }, { 0.5372621860558439, -0.49059920474662105, 1.4262766609297637, 0.6343496094919284 } },
        { { 1.3500865407003801, -1.6668834096363792, 0.8588608385908655 }, { 0.6904250192201368, -0.3988285300432808, 1.55723095557981, 0.7821834497813497 } },
        { { 1.4708137594741304, -1.5642117818172676, 0.9878392551724544 }, { 0.8484388530447331, -0.3290350497386401, 1.6857664421575231, 0.9337556892141705 } },
        { { 1.584630736957137, -1.4733374267504007, 1.111221018133082 }, { 1.0051856535789918, -0.2779981306263939, 1.8096584784962508, 1.0839053231501985 } } } },
    { name = 'Adagrad', opts = { lr = 0.1 },
      traj = {
        { { 0.90000000001, -2.0999999999983334, 0.400000000005 }, { 0.20000000014814812, -0.799999999972789, 1.1000000000092591, 0.30000000008333333 } },
        { { 0.8331035268523168, -2.172413793100922, 0.33753049525152046 }, { 0.15938615354754224, -0.8794005554145615, 1.0356683234912618, 0.2509738761349955 } },
        { { 0.7804561813655163, -2.2323681038444834, 0.2908991767882513 }, { 0.1344098384103437, -0.9486326414730538, 0.9861302864344486, 0.21851946091401062 } },
        { { 0.7362231326707235, -2.2848213565840747, 0.2536089816217943 }, { 0.1169216638668477, -1.0113686243082234, 0.9451603037777161, 0.1946284323006378 } },
        { { 0.6977148620648239, -2.332121729096437, 0.22269178427445252 }, { 0.10380261080711456, -1.0694275343303639, 0.9099360613800549, 0.1760073850625078 } } } },
    { name = 'Adagrad', opts = { lr = 0.1, lr_decay = 0.01, weight_decay = 0.1, initial_accumulator_value = 0.5, eps = 1e-06 },
      traj = {
        { { 0.9158809619082302, -2.0992650031826052, 0.4054657335321161 }, { 0.2863406746556184, -0.7387802731942862, 1.113845082821497, 0.37793054007862853 } },
        { { 0.855454479651536, -2.1706977426751295, 0.3452278889257902 }, { 0.2739377236908777, -0.7784498479569086, 1.054539642160867, 0.3585234130753327 } },
        { { 0.8069024899185663, -2.229320943133882, 0.300133290694336 }, { 0.2626119201196642, -0.8186696449277506, 1.0079479732037118, 0.3412594123545775 } },
        { { 0.7658126830345888, -2.2801274048795097, 0.26408503331042876 }, { 0.25221886062468934, -0.8591217269614339, 0.9691140749541736, 0.32575886161227713 } },
        { { 0.7299733822021873, -2.325501588557338, 0.23422459531221115 }, { 0.2426404622389182, -0.8995246662852238, 0.9356295298147428, 0.3117348457415999 } } } },
  },
  groups = { { { 0.9, -2.6, 0.3 }, { 0.299325, -0.7036749999999999, 1.1892, 0.39880000000000004 } }, { { 0.81, -3.3800000000000003, 0.18 }, { 0.2980455340828125, -0.7106961887921874, 1.1688735252, 0.3965271892 } }, { { 0.7290000000000001, -4.394, 0.108 }, { 0.29622778120444343, -0.7208034267508843, 1.140332707995649, 0.39330240589168863 } } },
  schedulers = {
    step = { 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125, 0.0125, 0.0125, 0.00625, 0.00625, 0.00625, 0.003125, 0.003125, 0.003125, 0.0015625, 0.0015625, 0.0015625, 0.00078125, 0.00078125, 0.00078125, 0.000390625 },
    multistep = { 0.1, 0.1, 0.03, 0.03, 0.03, 0.0026999999999999997, 0.0026999999999999997, 0.0026999999999999997, 0.0026999999999999997, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998 },
    exponential = { 0.1, 0.09000000000000001, 0.08100000000000002, 0.07290000000000002, 0.06561000000000002, 0.05904900000000002, 0.05314410000000002, 0.04782969000000002, 0.043046721000000024, 0.03874204890000002, 0.03486784401000002, 0.03138105960900001, 0.028242953648100012, 0.025418658283290013, 0.022876792454961013, 0.020589113209464913, 0.01853020188851842, 0.01667718169966658, 0.015009463529699923, 0.013508517176729932, 0.01215766545905694, 0.010941898913151246, 0.009847709021836121, 0.00886293811965251, 0.007976644307687259 },
    cosine = { 0.1, 0.09509795896116975, 0.08136274519200731, 0.061514786230837566, 0.03948521376916245, 0.019637254807992697, 0.005902041038830259, 0.001, 0.005902041038830253, 0.019637254807992683, 0.03948521376916243, 0.061514786230837525, 0.08136274519200731, 0.09509795896116978, 0.10000000000000002, 0.09509795896116978, 0.08136274519200734, 0.06151478623083755, 0.03948521376916246, 0.019637254807992707, 0.005902041038830264, 0.001, 0.005902041038830253, 0.019637254807992846, 0.03948521376916277 },
    linear_default = { 0.03333333333333333, 0.04666666666666667, 0.060000000000000005, 0.07333333333333335, 0.08666666666666668, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1 },
    linear = { 0.010000000000000002, 0.020000000000000004, 0.030000000000000006, 0.04000000000000001, 0.05000000000000001, 0.06000000000000001, 0.07000000000000002, 0.08000000000000002, 0.09000000000000002, 0.09000000000000002, 0.09000000000000002, 0.09000000000000002, 0.09000000000000002, 0.09000000000000002, 0.09000000000000002, 0.09000000000000002, 0.09000000000000002, 0.09000000000000002, 0.09000000000000002, 0.09000000000000002, 0.09000000000000002, 0.09000000000000002, 0.09000000000000002, 0.09000000000000002, 0.09000000000000002 },
    sequential = { 0.010000000000000002, 0.03250000000000001, 0.055000000000000014, 0.07750000000000003, 0.10000000000000003, 0.1, 0.0993844170297569, 0.09755282581475769, 0.0945503262094184, 0.0904508497187474, 0.08535533905932739, 0.07938926261462367, 0.07269952498697735, 0.06545084971874739, 0.05782172325201156, 0.05000000000000001, 0.04217827674798848, 0.03454915028125264, 0.027300475013022667, 0.020610737385376353, 0.014644660940672629, 0.009549150281252633, 0.005449673790581611, 0.0024471741852423235, 0.0006155829702431171 },
    constant = { 0.025, 0.025, 0.025, 0.025, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1 },
    lambda_cosine = { 0.020000000000000004, 0.04000000000000001, 0.06, 0.08000000000000002, 0.1, 0.1, 0.09901664203302127, 0.09610954559391705, 0.09140576474687265, 0.08511087728614863, 0.07750000000000001, 0.06890576474687266, 0.059703780847044426, 0.05029621915295562, 0.04109423525312738, 0.032500000000000015, 0.024889122713851394, 0.018594235253127367, 0.013890454406082955, 0.010983357966978744, 0.01, 0.010983357966978744, 0.013890454406082962, 0.01859423525312736, 0.02488912271385137 },
    constant_exp = { 0.05, 0.05, 0.05, 0.1, 0.08000000000000002, 0.06400000000000002, 0.051200000000000016, 0.04096000000000002, 0.03276800000000001, 0.026214400000000013, 0.02097152000000001, 0.016777216000000008, 0.013421772800000007, 0.010737418240000006, 0.008589934592000005, 0.0068719476736000045, 0.005497558138880004, 0.004398046511104004, 0.0035184372088832034, 0.002814749767106563, 0.0022517998136852503, 0.0018014398509482003, 0.0014411518807585604, 0.0011529215046068484, 0.0009223372036854787 },
    sequential3 = { 0.1, 0.05, 0.025, 0.0125, 0.1, 0.1, 0.06999999999999999, 0.06999999999999999, 0.048999999999999995, 0.048999999999999995, 0.1, 0.1, 0.1, 0.010000000000000002, 0.010000000000000002, 0.010000000000000002, 0.0010000000000000002, 0.0010000000000000002, 0.0010000000000000002, 0.0010000000000000002, 0.0010000000000000002, 0.0010000000000000002, 0.0010000000000000002, 0.0010000000000000002, 0.0010000000000000002 },
    onecycle = { 0.020000000000000018, 0.047490553843229644, 0.12366446078452265, 0.2310711967387225, 0.3451051728902086, 0.4396425795610643, 0.4930260361822525, 0.4989935775245158, 0.49099075121110264, 0.47524231600673683, 0.4522544395767425, 0.4227659711840672, 0.3877246944660442, 0.34825686488844926, 0.30563101096814466, 0.26121716272279843, 0.21644281777885202, 0.17274706042325755, 0.13153430825041282, 0.09412917302511849, 0.06173388657056329, 0.03538966004832708, 0.015943218574936337, 0.004019586779931182, 2e-06 },
    onecycle_momentum = { 0.95, 0.9442728012826604, 0.9284032373365577, 0.9060268340127661, 0.8822697556478731, 0.8625744625914449, 0.8514529091286974, 0.850201285300238, 0.8518018569652073, 0.854951556604879, 0.8595491502812526, 0.8654468675506567, 0.8724551509273948, 0.8803487484173038, 0.8888739533021842, 0.8977567584824742, 0.9067116632908827, 0.9154508497187474, 0.9236934331236499, 0.9311744900929366, 0.9376535733001805, 0.9429224396800933, 0.9468117435319868, 0.9491964794299315, 0.95 },
    onecycle3 = { 0.001, 0.0028000000000000004, 0.004600000000000001, 0.0064, 0.008200000000000002, 0.010000000000000002, 0.008199999999999999, 0.0063999999999999994, 0.0046, 0.0027999999999999987, 0.0009999999999999992, 0.0009238461538461539, 0.0008476923076923078, 0.0007715384615384615, 0.0006953846153846154, 0.0006192307692307693, 0.000543076923076923, 0.000466923076923077, 0.0003907692307692308, 0.00031461538461538465, 0.0002384615384615384, 0.0001623076923076924, 8.615384615384615e-05, 1.0000000000000026e-05 },
    onecycle3_beta1 = { 0.95, 0.9299999999999999, 0.9099999999999999, 0.89, 0.87, 0.85, 0.87, 0.89, 0.9099999999999999, 0.9299999999999999, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95 },
    cosine_groups = { { 0.1, 0.09755282581475769, 0.09045084971874738, 0.07938926261462367, 0.06545084971874739, 0.05000000000000001, 0.03454915028125264, 0.020610737385376353, 0.009549150281252635, 0.002447174185242324, 0.0, 0.0024471741852423235 }, { 0.02, 0.019510565162951538, 0.018090169943749474, 0.015877852522924733, 0.013090169943749475, 0.01, 0.006909830056250526, 0.0041221474770752695, 0.0019098300562505265, 0.0004894348370484647, 0.0, 0.0004894348370484647 } },
  },
  clip = {
    { max_norm = 1.0, norm_type = 2.0, total = 6.505414091354985, w = { 0.15371809269002606, 0.9223085561401564, 0.30743618538005213 }, v = { 0.01037597125657676, 0.056491399063584566, 0.16601554010522815, 0.018446171122803133 } },
    { max_norm = 100.0, norm_type = 2.0, total = 6.505414091354985, w = { 1.0, 6.0, 2.0 }, v = { 0.0675, 0.36749999999999994, 1.08, 0.12000000000000002 } },
    { max_norm = 0.5, norm_type = math.huge, total = 6.0, w = { 0.08333331944444676, 0.49999991666668053, 0.16666663888889352 }, v = { 0.005624999062500156, 0.03062499489583418, 0.0899999850000025, 0.009999998333333614 } },
    { max_norm = 2.0, norm_type = 1.0, total = 10.635, w = { 0.1880582803894424, 1.1283496823366543, 0.3761165607788848 }, v = { 0.012693933926287362, 0.06911141804312007, 0.2031029428205978, 0.02256699364673309 } },
    { max_norm = 1.0, norm_type = 3.0, total = 6.093995531250829, w = { 0.16409592537046358, 0.9845755522227815, 0.32819185074092716 }, v = { 0.011076474962506293, 0.06030525257364536, 0.17722359940010068, 0.019691511044455632 } },
  },
  clip32 = { total = 10.0, g = { 0.5999999642372131, -0.7999999523162842 } },
}

local f64 = { dtype = tide.float64 }
local c = tide.tensor({ 0.5, -1.5, 2.0 }, f64)

local function params()
  return tide.tensor({ 1.0, -2.0, 0.5 }, { dtype = tide.float64, requires_grad = true }),
    tide.tensor({ { 0.3, -0.7 }, { 1.2, 0.4 } }, { dtype = tide.float64, requires_grad = true })
end
local function loss(w, v) return (w * w * c):sum() + (v ^ 3):sum() * 0.25 end
local function backward(w, v) loss(w, v):backward() end

local function check_traj(w, v, want, what)
  H.close(w, want[1], 1e-10, what .. " w")
  H.close(v:view(-1), want[2], 1e-10, what .. " v")
end

local function describe_opts(o)
  local ks = {}
  for k, v in pairs(o) do ks[#ks + 1] = k .. "=" .. (type(v) == "table" and ("{" .. v[1] .. "," .. v[2] .. "}") or tostring(v)) end
  table.sort(ks)
  return table.concat(ks, " ")
end

describe("optimizers match PyTorch trajectories", function()
  for _, case in ipairs(REF.optimizers) do
    it(case.name .. " " .. describe_opts(case.opts), function()
      local w, v = params()
      local opt = tide.optim[case.name]({ w, v }, case.opts)
      for i = 1, 5 do
        opt:zero_grad(); backward(w, v); opt:step()
        check_traj(w, v, case.traj[i], ("step %d"):format(i))
      end
    end)
  end

  it("param groups take their own hyperparameters, defaults for the rest", function()
    local w, v = params()
    local opt = tide.optim.SGD({ { params = { w } }, { params = { v }, lr = 0.01, momentum = 0.9 } }, { lr = 0.1 })
    assert.equal(0.1, opt.param_groups[1].lr)
    assert.equal(0, opt.param_groups[1].momentum)
    assert.equal(0.01, opt.param_groups[2].lr)
    for i = 1, 3 do
      opt:zero_grad(); backward(w, v); opt:step()
      check_traj(w, v, REF.groups[i], "step " .. i)
    end
  end)

  it("step() skips parameters without a gradient and returns the closure's loss", function()
    local w, v = params()
    local opt = tide.optim.Adam({ w, v }, { lr = 0.1 })
    local l = opt:step(function() local l = (w * w):sum(); l:backward(); return l end)
    assert.is_true(math.abs(l:item() - 5.25) < 1e-12)
    H.close(v, { { 0.3, -0.7 }, { 1.2, 0.4 } }, 0)
    assert.is_true(math.abs(w[1]:item() - 0.9) < 1e-6)
  end)

  it("lr changed in param_groups applies from the next step", function()
    local w = tide.tensor({ 1.0 }, { dtype = tide.float64, requires_grad = true })
    local opt = tide.optim.SGD({ w }, { lr = 0.5 })
    w.grad = tide.tensor({ 1.0 }, f64); opt:step()
    opt.param_groups[1].lr = 0.25
    opt:step()
    H.close(w, { 0.25 }, 0)
  end)

  it("float32 parameters are updated in float32", function()
    local w = tide.tensor({ 1, 2 }, { dtype = tide.float32, requires_grad = true })
    local opt = tide.optim.AdamW({ w }, { lr = 0.1 })
    w.grad = tide.tensor({ 0.5, -0.5 }, { dtype = tide.float32 })
    opt:step()
    assert.equal(tide.float32, w.dtype)
    H.close(w, { 1 * (1 - 0.1 * 0.01) - 0.1, 2 * (1 - 0.1 * 0.01) + 0.1 }, 1e-6)
    assert.is_false(w.grad.requires_grad)
  end)

  it("Adam and AdamW's fused step gives the same bits as the op-by-op formula (fused = false)", function()
    -- float32 and float64, weight decay both ways, amsgrad, maximize; gradients
    -- of mixed magnitudes, 6 steps (bias corrections change every step)
    local function same(x, y) return x:ne(y):sum():item() == 0 end
    for _, name in ipairs { "Adam", "AdamW" } do
      for _, o in ipairs { { lr = 0.01 }, { lr = 0.003, weight_decay = 0.05, amsgrad = true, betas = { 0.8, 0.95 } },
                           { lr = 0.02, maximize = true, eps = 1e-6, weight_decay = 0.1 } } do
        for _, dt in ipairs { tide.float32, tide.float64 } do
          tide.manual_seed(11)
          local p0 = tide.randn({ 257, 33 }, dt)
          local a, b = p0:clone():requires_grad_(), p0:clone():requires_grad_()
          local fo, so = {}, {}
          for k, v in pairs(o) do fo[k] = v; so[k] = v end
          so.fused = false
          local fused, slow = tide.optim[name]({ a }, fo), tide.optim[name]({ b }, so)
          for step = 1, 6 do
            local g = tide.randn({ 257, 33 }, dt) * (10 ^ (step % 3 - 1))
            a.grad = g:clone(); b.grad = g:clone()
            local va = a._version
            fused:step(); slow:step()
            local what = ("%s %s %s step %d"):format(name, tostring(dt), tostring(o.amsgrad or o.maximize or ""), step)
            assert(same(a, b), what .. ": parameters differ, max |diff| " .. (a - b):abs():max():item())
            assert(same(fused.state[a].exp_avg, slow.state[b].exp_avg), what .. ": exp_avg differs")
            assert(same(fused.state[a].exp_avg_sq, slow.state[b].exp_avg_sq), what .. ": exp_avg_sq differs")
            if o.amsgrad then assert(same(fused.state[a].max_exp_avg_sq, slow.state[b].max_exp_avg_sq), what) end
            if va then assert.is_true(a._version > va, what .. ": the fused step bumps the version") end
          end
        end
      end
    end
    local w = tide.randn(3):requires_grad_()
    H.raises(function() tide.optim.Adam({ w }, { fused = 1 }) end, "fused must be a boolean, got number")
    -- a state dict saved before the option existed loads with its default
    local opt = tide.optim.AdamW({ w })
    local sd = opt:state_dict()
    sd.param_groups[1].fused = nil
    opt:load_state_dict(sd)
    assert.is_true(opt.param_groups[1].fused)
  end)
end)

describe("printing", function()
  it("lists each parameter group's hyperparameters like PyTorch", function()
    local w, v = params()
    local opt = tide.optim.SGD({ { params = { w } }, { params = { v }, lr = 0.5 } }, { lr = 0.1, momentum = 0.9 })
    assert.equal(table.concat({ "SGD (", "Parameter Group 0", "    dampening: 0", "    lr: 0.1", "    maximize: false",
      "    momentum: 0.9", "    nesterov: false", "    weight_decay: 0", "Parameter Group 1", "    dampening: 0", "    lr: 0.5",
      "    maximize: false", "    momentum: 0.9", "    nesterov: false", "    weight_decay: 0", ")" }, "\n"), tostring(opt))
    assert.truthy(tostring(tide.optim.Adam({ w })):find("    betas: {0.9, 0.999}\n", 1, true))
  end)
end)

describe("zero_grad", function()
  it("sets grads to nil by default and zeroes them with set_to_none=false", function()
    local w, v = params()
    local opt = tide.optim.SGD({ w, v }, { lr = 0.1 })
    backward(w, v)
    opt:zero_grad({ set_to_none = false })
    H.close(w.grad, { 0, 0, 0 }, 0)
    H.close(v.grad, { { 0, 0 }, { 0, 0 } }, 0)
    opt:zero_grad()
    assert.is_nil(w.grad)
    assert.is_nil(v.grad)
  end)
end)

describe("optimizer state_dict", function()
  local function roundtrip(name, opts)
    local w1, v1 = params()
    local o1 = tide.optim[name]({ w1, v1 }, opts)
    for _ = 1, 2 do o1:zero_grad(); backward(w1, v1); o1:step() end
    local sd = o1:state_dict()
    -- a fresh optimizer on copies of the parameters continues identically
    local w2 = w1:detach():clone():requires_grad_()
    local v2 = v1:detach():clone():requires_grad_()
    local o2 = tide.optim[name]({ w2, v2 }, { lr = 123 })
    o2:load_state_dict(sd)
    assert.equal(opts.lr, o2.param_groups[1].lr)
    for _ = 1, 3 do
      o1:zero_grad(); backward(w1, v1); o1:step()
      o2:zero_grad(); backward(w2, v2); o2:step()
    end
    H.close(w2, w1, 0); H.close(v2, v1, 0)
    return sd
  end

  it("round-trips SGD momentum, Adam amsgrad, RMSprop centered, Adagrad", function()
    local sd = roundtrip("SGD", { lr = 0.1, momentum = 0.9, nesterov = true })
    assert.is_true(tide.is_tensor(sd.state[1].momentum_buffer))
    assert.same({ 1, 2 }, sd.param_groups[1].params)
    sd = roundtrip("Adam", { lr = 0.05, amsgrad = true, betas = { 0.8, 0.99 } })
    assert.equal(2, sd.state[2].step)
    assert.same({ 2, 2 }, sd.state[2].exp_avg:size())
    assert.same({ 0.8, 0.99 }, sd.param_groups[1].betas)
    roundtrip("AdamW", { lr = 0.05 })
    roundtrip("RMSprop", { lr = 0.01, centered = true, momentum = 0.9 })
    roundtrip("Adagrad", { lr = 0.1, lr_decay = 0.01 })
  end)

  it("loads state keyed by strings (as read back from a JSON header)", function()
    local w, v = params()
    local opt = tide.optim.SGD({ w, v }, { lr = 0.1, momentum = 0.9 })
    backward(w, v); opt:step()
    local sd = opt:state_dict()
    local st = {}
    for k, x in pairs(sd.state) do st[tostring(k)] = x end
    sd.state = st
    local o2 = tide.optim.SGD({ w, v }, { lr = 0.1, momentum = 0.9 })
    o2:load_state_dict(sd)
    H.close(o2:state_dict().state[2].momentum_buffer, opt:state_dict().state[2].momentum_buffer, 0)
  end)

  it("the state dict holds copies, not the live buffers", function()
    local w, v = params()
    local opt = tide.optim.Adam({ w, v }, { lr = 0.1 })
    backward(w, v); opt:step()
    local sd = opt:state_dict()
    local before = sd.state[1].exp_avg:totable()
    opt:step()
    H.close(sd.state[1].exp_avg, before, 0)
    assert.equal(1, sd.state[1].step)
  end)

  it("load_state_dict checks group count, group sizes and state shapes", function()
    local w, v = params()
    local opt = tide.optim.Adam({ w, v }, { lr = 0.1 })
    backward(w, v); opt:step()
    local sd = opt:state_dict()
    local o2 = tide.optim.Adam({ { params = { w } }, { params = { v } } })
    H.raises(function() o2:load_state_dict(sd) end, "load_state_dict", "1 parameter groups", "has 2")
    local o3 = tide.optim.Adam({ w })
    H.raises(function() o3:load_state_dict(sd) end, "parameter group 1 has 2 parameters", "1 in the optimizer")
    local v2 = tide.zeros(3, 2, { dtype = tide.float64, requires_grad = true })
    local o4 = tide.optim.Adam({ w, v2 })
    H.raises(function() o4:load_state_dict(sd) end, "of parameter 2 has shape (2x2)", "parameter has shape (3x2)")
    H.raises(function() o4:load_state_dict(42) end, "bad argument #1 to 'load_state_dict'")
    assert.is_nil(next(o4.state))   -- nothing half-loaded
  end)

  it("add_param_group adds parameters with defaults and rejects duplicates", function()
    local w, v = params()
    local opt = tide.optim.SGD({ w }, { lr = 0.1, momentum = 0.5 })
    opt:add_param_group({ params = { v }, lr = 0.01 })
    assert.equal(2, #opt.param_groups)
    assert.equal(0.5, opt.param_groups[2].momentum)
    assert.equal(0.01, opt.param_groups[2].lr)
    backward(w, v); opt:step()
    H.close(v, tide.tensor({ { 0.3, -0.7 }, { 1.2, 0.4 } }, f64) - v.grad * 0.01, 1e-15)
    H.raises(function() opt:add_param_group({ params = { w } }) end, "more than one parameter group")
  end)
end)

describe("optimizer errors", function()
  local w = tide.zeros(2, { requires_grad = true })
  it("reject bad hyperparameters, naming the value", function()
    H.raises(function() tide.optim.SGD({ w }, { lr = -0.1 }) end, "SGD: invalid learning rate: -0.1")
    H.raises(function() tide.optim.SGD({ w }, {}) end, "bad argument #2 to 'SGD' (lr is required)")
    H.raises(function() tide.optim.SGD({ w }, { lr = 0.1, nesterov = true }) end,
      "Nesterov momentum requires a momentum and zero dampening (momentum=0")
    H.raises(function() tide.optim.SGD({ w }, { lr = 0.1, momentum = 0.9, dampening = 0.1, nesterov = true }) end,
      "dampening=0.1")
    H.raises(function() tide.optim.Adam({ w }, { betas = { 0.9, 1.0 } }) end, "invalid beta parameter at index 2: 1")
    H.raises(function() tide.optim.AdamW({ w }, { betas = { -0.1, 0.9 } }) end, "index 1: -0.1")
    H.raises(function() tide.optim.Adam({ w }, { eps = -1 }) end, "invalid epsilon value: -1")
    H.raises(function() tide.optim.RMSprop({ w }, { alpha = -1 }) end, "invalid alpha value: -1")
    H.raises(function() tide.optim.Adagrad({ w }, { lr_decay = -1 }) end, "invalid lr_decay value: -1")
    H.raises(function() tide.optim.Adam({ w }, { lrr = 1 }) end, "Adam: unknown option 'lrr'")
  end)
  it("reject non-float, non-leaf and non-tensor parameters", function()
    H.raises(function() tide.optim.SGD({ tide.long({ 1, 2 }) }, { lr = 1 }) end,
      "SGD: can only optimize floating-point Tensors, but parameter 1 has dtype int64")
    H.raises(function() tide.optim.Adam({ w, w * 2 }) end, "Adam: can't optimize a non-leaf Tensor (parameter 2")
    H.raises(function() tide.optim.Adam({ w, 3 }) end, "bad argument #1 to 'Adam' (parameter 2 is a number")
    H.raises(function() tide.optim.Adam({}) end, "Adam: optimizer got an empty parameter list")
    H.raises(function() tide.optim.Adam(nil) end, "bad argument #1 to 'Adam'")
    H.raises(function() tide.optim.Adam({ w, w }) end, "more than one parameter group")
  end)
  it("points at the caller's line", function()
    local err = H.raises(function() tide.optim.SGD({ w }, { lr = -1 }) end, "invalid learning rate")
    assert.truthy(err:find("optim_spec.lua:%d+:"))
  end)
end)

-- lrs returned by get_last_lr() before each of n optimizer/scheduler steps
local function sched_lrs(make, n, lr, opt_cls, extra)
  local p = tide.zeros(2, { requires_grad = true })
  local opt = (opt_cls or tide.optim.SGD)({ p }, { lr = lr or 0.1, momentum = extra })
  local s = make(opt)
  local lrs, moms = {}, {}
  for i = 1, n or 25 do
    lrs[i] = s:get_last_lr()[1]
    local g = opt.param_groups[1]
    moms[i] = g.betas and g.betas[1] or g.momentum
    opt:step(); s:step()
  end
  return lrs, moms, s, opt
end

describe("lr schedulers match PyTorch's lr sequences", function()
  local S = tide.optim.lr_scheduler
  local cases = {
    step = function(o) return S.StepLR(o, { step_size = 3, gamma = 0.5 }) end,
    multistep = function(o) return S.MultiStepLR(o, { milestones = { 9, 2, 5, 5 }, gamma = 0.3 }) end,
    exponential = function(o) return S.ExponentialLR(o, { gamma = 0.9 }) end,
    cosine = function(o) return S.CosineAnnealingLR(o, { T_max = 7, eta_min = 0.001 }) end,
    linear_default = function(o) return S.LinearLR(o) end,
    linear = function(o) return S.LinearLR(o, { start_factor = 0.1, end_factor = 0.9, total_iters = 8 }) end,
    sequential = function(o)
      return S.SequentialLR(o, { schedulers = { S.LinearLR(o, { start_factor = 0.1, total_iters = 4 }),
        S.CosineAnnealingLR(o, { T_max = 20 }) }, milestones = { 5 } })
    end,
    constant = function(o) return S.ConstantLR(o, { factor = 0.25, total_iters = 4 }) end,
    lambda_cosine = function(o)
      return S.SequentialLR(o, { schedulers = { S.LambdaLR(o, { lr_lambda = function(e) return math.min(1.0, (e + 1) / 5) end }),
        S.CosineAnnealingLR(o, { T_max = 15, eta_min = 0.01 }) }, milestones = { 5 } })
    end,
    constant_exp = function(o)
      return S.SequentialLR(o, { schedulers = { S.ConstantLR(o, { factor = 0.5, total_iters = 10 }),
        S.ExponentialLR(o, { gamma = 0.8 }) }, milestones = { 3 } })
    end,
    sequential3 = function(o)
      return S.SequentialLR(o, { schedulers = { S.ExponentialLR(o, { gamma = 0.5 }), S.StepLR(o, { step_size = 2, gamma = 0.7 }),
        S.MultiStepLR(o, { milestones = { 3, 6 }, gamma = 0.1 }) }, milestones = { 4, 10 } })
    end,
  }
  for name, make in pairs(cases) do
    it(name, function()
      local lrs = sched_lrs(make)
      H.close(lrs, REF.schedulers[name], 1e-15)
    end)
  end

  it("OneCycleLR (cos) cycles lr and SGD momentum", function()
    local lrs, moms = sched_lrs(function(o) return tide.optim.OneCycleLR(o, { max_lr = 0.5, total_steps = 25 }) end,
      25, 0.1, nil, 0.9)
    H.close(lrs, REF.schedulers.onecycle, 1e-15)
    H.close(moms, REF.schedulers.onecycle_momentum, 1e-15)
  end)

  it("OneCycleLR three-phase linear over epochs x steps_per_epoch cycles Adam's beta1", function()
    local lrs, moms, s = sched_lrs(function(o)
      return tide.optim.OneCycleLR(o, { max_lr = 0.01, epochs = 3, steps_per_epoch = 8, three_phase = true,
        anneal_strategy = "linear", pct_start = 0.25, div_factor = 10, final_div_factor = 100 })
    end, 24, 0.1, tide.optim.Adam)
    H.close(lrs, REF.schedulers.onecycle3, 1e-15)
    H.close(moms, REF.schedulers.onecycle3_beta1, 1e-15)
    H.raises(function() s:step() end, "OneCycleLR: tried to step 26 times; the specified number of total steps is 24")
  end)

  it("schedules every param group from its own initial lr", function()
    local p, q = tide.zeros(2, { requires_grad = true }), tide.zeros(1, { requires_grad = true })
    local opt = tide.optim.SGD({ { params = { p } }, { params = { q }, lr = 0.02 } }, { lr = 0.1 })
    local s = tide.optim.CosineAnnealingLR(opt, { T_max = 10 })
    local g1, g2 = {}, {}
    for i = 1, 12 do
      local l = s:get_last_lr(); g1[i], g2[i] = l[1], l[2]
      opt:step(); s:step()
    end
    H.close(g1, REF.schedulers.cosine_groups[1], 1e-15)
    H.close(g2, REF.schedulers.cosine_groups[2], 1e-15)
    assert.equal(opt.param_groups[2].lr, s:get_last_lr()[2])
  end)

  it("state_dict round trip continues the sequence identically", function()
    local S2 = tide.optim.lr_scheduler
    local function make(o)
      return S2.SequentialLR(o, { schedulers = { S2.LinearLR(o, { start_factor = 0.1, total_iters = 4 }),
        S2.CosineAnnealingLR(o, { T_max = 20 }) }, milestones = { 5 } })
    end
    for _, mk in ipairs { make, function(o) return S2.CosineAnnealingLR(o, { T_max = 7, eta_min = 0.001 }) end,
      function(o) return S2.OneCycleLR(o, { max_lr = 0.5, total_steps = 25 }) end } do
      local p = tide.zeros(2, { requires_grad = true })
      local opt = tide.optim.SGD({ p }, { lr = 0.1, momentum = 0.9 })
      local s = mk(opt)
      for _ = 1, 9 do opt:step(); s:step() end
      local osd, ssd = opt:state_dict(), s:state_dict()
      local want = {}
      for i = 1, 10 do opt:step(); s:step(); want[i] = s:get_last_lr()[1] end
      local p2 = tide.zeros(2, { requires_grad = true })
      local opt2 = tide.optim.SGD({ p2 }, { lr = 0.1, momentum = 0.9 })
      local s2 = mk(opt2)
      opt2:load_state_dict(osd); s2:load_state_dict(ssd)
      local got = {}
      for i = 1, 10 do opt2:step(); s2:step(); got[i] = s2:get_last_lr()[1] end
      H.close(got, want, 0)
    end
  end)

  it("LambdaLR's state_dict leaves the functions out and keeps them on load", function()
    local p = tide.zeros(1, { requires_grad = true })
    local opt = tide.optim.SGD({ p }, { lr = 0.1 })
    local s = tide.optim.LambdaLR(opt, { lr_lambda = function(e) return 0.5 ^ e end })
    s:step(); s:step()
    local sd = s:state_dict()
    assert.is_nil(sd.lr_lambdas)
    assert.equal(2, sd.last_epoch)
    local s2 = tide.optim.LambdaLR(opt, { lr_lambda = function(e) return 0.5 ^ e end })
    s2:load_state_dict(sd); s2:step()
    H.close(s2:get_last_lr(), { 0.1 * 0.125 }, 1e-17)
  end)

  it("step(epoch) uses the closed form", function()
    local p = tide.zeros(1, { requires_grad = true })
    local opt = tide.optim.SGD({ p }, { lr = 0.1 })
    local s = tide.optim.StepLR(opt, { step_size = 3, gamma = 0.5 })
    s:step(7)
    H.close(s:get_last_lr(), { 0.1 * 0.25 }, 1e-17)
  end)

  it("errors name the bad option", function()
    local p = tide.zeros(1, { requires_grad = true })
    local opt = tide.optim.SGD({ p }, { lr = 0.1 })
    H.raises(function() tide.optim.StepLR(opt, {}) end, "bad argument #2 to 'StepLR' (option 'step_size' is required)")
    H.raises(function() tide.optim.StepLR(opt, { step_size = 0 }) end, "step_size must be a positive integer, got 0")
    H.raises(function() tide.optim.StepLR(opt, { step_size = 2, gama = 1 }) end, "unknown option 'gama'")
    H.raises(function() tide.optim.LinearLR(opt, { start_factor = 0 }) end, "LinearLR: start_factor must be in (0, 1], got 0")
    H.raises(function() tide.optim.CosineAnnealingLR(opt, { T_max = 0 }) end, "T_max must be positive, got 0")
    H.raises(function() tide.optim.ConstantLR(opt, { factor = 2 }) end, "ConstantLR: factor must be in [0, 1], got 2")
    H.raises(function() tide.optim.LambdaLR(opt, {}) end, "bad argument #2 to 'LambdaLR' (option 'lr_lambda'")
    H.raises(function() tide.optim.LambdaLR(opt, { lr_lambda = { 1 } }) end, "LambdaLR: lr_lambda 1 is a number, expected a function")
    H.raises(function() tide.optim.OneCycleLR(opt, { max_lr = 1 }) end, "define either total_steps OR (epochs AND steps_per_epoch)")
    H.raises(function() tide.optim.OneCycleLR(opt, { max_lr = 1, total_steps = 10, anneal_strategy = "exp" }) end,
      "anneal_strategy must be one of 'cos' or 'linear', got 'exp'")
    H.raises(function() tide.optim.OneCycleLR(opt, { max_lr = 1, total_steps = 10, pct_start = 1.5 }) end, "pct_start between 0 and 1, but got 1.5")
    H.raises(function() tide.optim.OneCycleLR(opt, { max_lr = 1, epochs = 2, steps_per_epoch = -1 }) end,
      "expected positive integer steps_per_epoch, but got -1")
    H.raises(function() tide.optim.OneCycleLR(tide.optim.Adagrad({ p }), { max_lr = 1, total_steps = 10 }) end,
      "optimizer must support momentum")
    local other = tide.optim.SGD({ tide.zeros(1, { requires_grad = true }) }, { lr = 0.1 })
    H.raises(function()
      tide.optim.SequentialLR(opt, { schedulers = { tide.optim.ExponentialLR(other, { gamma = 0.9 }) }, milestones = {} })
    end, "scheduler 1 does not")
    H.raises(function()
      tide.optim.SequentialLR(opt, { schedulers = { tide.optim.ExponentialLR(opt, { gamma = 0.9 }) }, milestones = { 3 } })
    end, "got 1 schedulers and 1 milestones")
  end)
end)

describe("clip_grad_norm_ and clip_grad_value_", function()
  for _, case in ipairs(REF.clip) do
    it(("max_norm=%g norm_type=%g"):format(case.max_norm, case.norm_type), function()
      local w, v = params()
      backward(w, v)
      local total = clip.clip_grad_norm_({ w, v }, case.max_norm, case.norm_type)
      assert.equal("number", type(total))
      assert.is_true(math.abs(total - case.total) <= 1e-12 * case.total, ("total %.17g vs %.17g"):format(total, case.total))
      H.close(w.grad, case.w, 1e-12)
      H.close(v.grad:view(-1), case.v, 1e-12)
    end)
  end

  it("computes in float32 for float32 grads, skips params without grads, accepts a tensor", function()
    local w = tide.tensor({ 3, -4 }, { dtype = tide.float32, requires_grad = true })
    local unused = tide.zeros(2, { requires_grad = true })
    ;(w * w):sum():backward()
    local total = clip.clip_grad_norm_({ unused, w }, 1.0)
    assert.equal(REF.clip32.total, total)
    H.close(w.grad, REF.clip32.g, 0)
    assert.is_nil(unused.grad)
    assert.equal(0, clip.clip_grad_norm_({ unused }, 1.0))
    H.close(clip.clip_grad_norm_(w, 10, "inf"), 0.79999995, 1e-7)
  end)

  it("error_if_nonfinite raises on an infinite norm", function()
    local w = tide.tensor({ 1, 2 }, { dtype = tide.float64, requires_grad = true })
    w.grad = tide.tensor({ math.huge, 1 }, f64)
    H.raises(function() clip.clip_grad_norm_({ w }, 1.0, 2, true) end, "clip_grad_norm_: the total norm of order 2", "non-finite (inf)")
    H.raises(function() clip.clip_grad_norm_({ w }, "1") end, "bad argument #2 to 'clip_grad_norm_' (number expected, got string)")
  end)

  it("clip_grad_value_ clamps each element", function()
    local w, v = params()
    backward(w, v)
    clip.clip_grad_value_({ w, v }, 1.5)
    H.close(w.grad, { 1.0, 1.5, 1.5 }, 0)
    H.close(v.grad, { { 0.75 * 0.09, 0.75 * 0.49 }, { 0.75 * 1.44, 0.75 * 0.16 } }, 1e-15)
    H.raises(function() clip.clip_grad_value_({ w }, nil) end, "bad argument #2 to 'clip_grad_value_'")
  end)
end)
